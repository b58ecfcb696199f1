"""NIC's example nginx-config ConfigMaps (../shared/vendor/nic-examples-v5.5.4),
applied unchanged with --nginx-configmaps, behave as their READMEs say:
ingress-resources/access-control (set-real-ip-from and real-ip-header make the
client's X-Real-IP the address the Policy checks), custom-resources/grpc-upstreams
(http2: HTTP/2 by ALPN), and the examples whose ConfigMap sets only
resolver-addresses (NGINX Plus: a Warning, the rest applies)."""

from __future__ import annotations

import socket
import ssl

from testkit.configmap_docs import _updated
from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    service_with_backends,
    tls_secret,
)
from testkit.nic_fixtures import VENDOR

EXAMPLES = VENDOR / "nic-examples-v5.5.4"


def _example(ferryman: Ferryman, folder: str, name: str) -> None:
    slug = folder.replace("/", "-")
    ferryman.write_text(f"{slug}-{name}", (EXAMPLES / folder / name).read_text())


def _status(ferryman: Ferryman, real_ip: str) -> int:
    headers = {"X-Real-IP": real_ip}
    return ferryman.get("cafe.example.com", "/coffee", https=True, headers=headers).status


def test_access_control_behind_a_proxy(ferryman: Ferryman, backends: Backends) -> None:
    """README: with the ConfigMap, X-Real-IP 10.0.0.1 passes the allow policy
    (10.0.0.0/8) and 192.168.1.1 gets 403; the deny policy turns both around."""
    folder = "ingress-resources/access-control"
    ferryman.extra_args += [
        "--ingress-class",
        "nginx",
        "--nginx-configmaps",
        "default/nginx-config",
    ]
    ferryman.write("coffee", service_with_backends("coffee-svc", [backends.start("coffee")]))
    ferryman.write("tea", service_with_backends("tea-svc", [backends.start("tea")]))
    ferryman.write("tls", tls_secret("tls-secret", ["cafe.example.com"]))  # make secrets
    _example(ferryman, folder, "nginx-config.yaml")
    _example(ferryman, folder, "access-control-policy-allow.yaml")
    _example(ferryman, folder, "cafe-ingress.yaml")
    ferryman.start()
    assert _status(ferryman, "10.0.0.1") == 200
    assert _status(ferryman, "192.168.1.1") == 403
    ferryman.remove(f"{folder.replace('/', '-')}-access-control-policy-allow")
    _example(ferryman, folder, "access-control-policy-deny.yaml")
    eventually(lambda: _status(ferryman, "10.0.0.1") == 403, 60, "the deny policy")
    assert _status(ferryman, "192.168.1.1") == 200


def _alpn(port: int) -> str | None:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2", "http/1.1"])
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname="grpc.example.com") as tls,
    ):
        return tls.selected_alpn_protocol()


def test_grpc_upstreams_configmap_turns_http2_on(ferryman: Ferryman, backends: Backends) -> None:
    ferryman.extra_args += ["--nginx-configmaps", "nginx-ingress/nginx-config"]
    ferryman.write("tls", tls_secret("grpc-secret", ["grpc.example.com"]))
    ferryman.write(
        "ing",
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": {"name": "grpc", "namespace": "default"},
            "spec": {
                "ingressClassName": "ferryman",
                "tls": [{"hosts": ["grpc.example.com"], "secretName": "grpc-secret"}],
                "rules": [{"host": "grpc.example.com"}],
            },
        },
    )
    _example(ferryman, "custom-resources/grpc-upstreams", "nginx-config.yaml")
    ferryman.start()
    assert _alpn(ferryman.https_port) == "h2"
    assert _updated(ferryman, 1)[-1][1] == "Updated"


def test_resolver_addresses_is_nginx_plus_only(ferryman: Ferryman, backends: Backends) -> None:
    ferryman.extra_args += ["--nginx-configmaps", "nginx-ingress/nginx-config"]
    ferryman.write("svc", service_with_backends("app", [backends.start("app")]))
    _example(ferryman, "custom-resources/jwks", "nginx-config.yaml")
    ferryman.start()
    events = _updated(ferryman, 1)
    assert events[-1][1] == "UpdatedWithError"
    warnings = [e for e in ferryman.events() if e.get("reason") == "InvalidValue"]
    assert len(warnings) == 1
    assert "'resolver-addresses'" in warnings[0]["message"]
    assert "NGINX Plus only" in warnings[0]["message"]
    assert ferryman.reloads() == 1  # nothing else to apply
