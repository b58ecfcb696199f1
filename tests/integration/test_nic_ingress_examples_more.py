"""More of NIC's Ingress examples (../shared/vendor/nic-examples-v5.5.4/ingress-resources),
applied unchanged (the folder's manifests, or the manifests its README shows),
through real NGINX with real backends: what a user sees, as the README promises
it, or, where ferryman refuses a feature, the Event saying why with the rest
still served. The examples' Deployments are this machine's test backends
behind Services of the examples' names (tea-svc, coffee-svc, ...); the Secrets
NIC's ``make secrets`` generates are made here.

The examples with Policies (cors, ingress-mtls, egress-mtls, external-auth,
external-auth-mergeable) and rate-limit, proxy-redirect and
session-persistence: tests/integration/test_nic_ingress_examples_policies.py.
Not tested, having no manifest: customization (its README points to the
ConfigMap and annotation docs) and jwt-secret-policy (an empty folder)."""

from __future__ import annotations

import re

import httpx
import pytest

from testkit.configmap_docs import _updated
from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    service_with_backends,
    tls_secret,
)
from testkit.nic_ingress_examples import EXAMPLES, HOST, _cafe, example, last_event


def readme_blocks(folder: str, kind: str) -> list[str]:
    """The README's yaml blocks of ``kind``, in order (indented ones dedented)."""
    text = (EXAMPLES / folder / "README.md").read_text()
    blocks = re.findall(r"^( *)```yaml\n(.*?)^ *```", text, re.S | re.M)
    out = []
    for indent, body in blocks:
        lines = [line.removeprefix(indent) for line in body.splitlines()]
        block = "\n".join(lines) + "\n"
        if re.search(rf"^kind: {kind}$", block, re.M):
            out.append(block)
    return out


def invalid_values(f: Ferryman) -> list[str]:
    """The ConfigMap's per-key Warnings (reason InvalidValue)."""
    return [e["message"] for e in f.events() if e.get("reason") == "InvalidValue"]


def test_empty_host(ferryman: Ferryman, backends: Backends) -> None:
    """README: /coffee and /tea are served whatever the Host header. Over plain
    HTTP they are; the README's HTTPS requests need NIC's
    -default-server-tls-secret, which ferryman does not have: a handshake for a
    name without a TLS Secret is refused (left: docs/design.md, one server)."""
    f = ferryman
    _cafe(f, backends)
    example(f, "empty-host", "cafe-ingress.yaml")
    f.start()
    for host in ("cafe.example.com", "anything.test", "127.0.0.1"):
        assert f.get(host, "/coffee").served_by == "coffee"
        assert f.get(host, "/tea").served_by == "tea"
    assert f.get("other.test", "/milk").status == 404
    assert last_event(f, "cafe-empty-host")["reason"] == "AddedOrUpdated"
    with pytest.raises(httpx.ConnectError):
        f.get("cafe.example.com", "/coffee", https=True)


def test_empty_host_mergeable(ferryman: Ferryman, backends: Backends) -> None:
    """README: the hostless master owns the default server and the two minions'
    paths are served under it, whatever the Host header (over plain HTTP: as
    for test_empty_host, HTTPS needs a default server certificate)."""
    f = ferryman
    _cafe(f, backends)
    example(f, "empty-host-mergeable", "cafe-master.yaml", "coffee-minion.yaml", "tea-minion.yaml")
    f.start()
    for host in ("cafe.example.com", "anything.test"):
        assert f.get(host, "/coffee").served_by == "coffee"
        assert f.get(host, "/tea").served_by == "tea"
    assert f.get("x.test", "/milk").status == 404
    for name in ("cafe-empty-host-master", "coffee-minion", "tea-minion"):
        assert last_event(f, name)["reason"] == "AddedOrUpdated"


def test_externalname_services(ferryman: Ferryman) -> None:
    """The README's ExternalName Service and Ingress: NIC routes to the DNS name
    with NGINX Plus's resolver only; ferryman resolves no DNS names for
    upstreams, so the Service has no endpoints and the path answers 503, as for
    any Service without endpoints."""
    f = ferryman
    f.extra_args += ["--ingress-class", "nginx"]
    f.write_text("svc.yaml", readme_blocks("externalname-services", "Service")[0])
    f.write_text("ing.yaml", readme_blocks("externalname-services", "Ingress")[0])
    f.start()
    r = f.get("example.com", "/")
    assert r.status == 503 and "503 Service Temporarily Unavailable" in r.text


def test_path_regex_mergeable(ferryman: Ferryman, backends: Backends) -> None:
    """README, mergeable example 1: the coffee minion's path is a case-insensitive
    regular expression, the tea minion's a case-sensitive one; example 2 (the tea
    minion without path-regex) makes /tea a prefix again."""
    f = ferryman
    _cafe(f, backends)
    f.write("tls", tls_secret("tls-secret", [HOST]))
    master, *minions = readme_blocks("path-regex", "Ingress")[3:6]
    f.write_text("regex-master.yaml", master)
    f.write_text("regex-coffee.yaml", minions[0])
    f.write_text("regex-tea.yaml", minions[1])
    f.start()

    def served(path: str) -> str | None:
        r = f.get(HOST, path, https=True)
        return r.served_by if r.status == 200 else str(r.status)

    assert served("/coffee/A1") == "coffee" and served("/coffee/b") == "coffee"
    assert served("/tea/A") == "tea"
    assert served("/tea/a") == "404" and served("/coffee/-") == "404"
    f.write_text("regex-tea.yaml", readme_blocks("path-regex", "Ingress")[8])
    eventually(lambda: served("/tea/a") == "tea", 60, "tea as a prefix")
    assert served("/tea") == "tea" and served("/coffee/z") == "coffee"


def test_path_regex_v1beta1_listings_are_rejected(ferryman: Ferryman, backends: Backends) -> None:
    """README, simple examples 1-3: their Ingresses use serviceName/servicePort
    (networking.k8s.io/v1beta1's backend, removed in Kubernetes 1.22) under
    apiVersion networking.k8s.io/v1: the API server would refuse them; ferryman
    rejects each, naming the missing pathType and the v1beta1 field."""
    f = ferryman
    _cafe(f, backends)
    f.write("tls", tls_secret("tls-secret", [HOST]))
    f.write_text("case-sensitive.yaml", readme_blocks("path-regex", "Ingress")[0])
    f.start()
    event = last_event(f, "cafe-ingress")
    assert (event["type"], event["reason"]) == ("Warning", "Rejected"), event
    assert (
        "spec.rules[0].http.paths[0].pathType: must be one of Exact, Prefix, "
        "ImplementationSpecific; spec.rules[0].http.paths[0].backend.serviceName: v1beta1's "
        "field (removed in Kubernetes 1.22); networking.k8s.io/v1 takes service.name and "
        "service.port"
    ) in event["message"]
    assert f.get(HOST, "/tea/A").status == 404


def test_custom_annotations(ferryman: Ferryman, backends: Backends) -> None:
    """custom.nginx.org/* annotations take effect through a custom template (the
    README's nginx-config ``ingress-template``); ferryman renders no user
    templates: the ConfigMap key is refused by name, the Ingress served with a
    Warning naming each custom annotation, and no request is rate-limited."""
    f = ferryman
    _cafe(f, backends)
    f.extra_args += ["--nginx-configmaps", "nginx-ingress/nginx-config"]
    f.write_text("nginx-config.yaml", readme_blocks("custom-annotations", "ConfigMap")[0])
    f.write_text("cafe-ingress.yaml", readme_blocks("custom-annotations", "Ingress")[0])
    f.start()
    assert _updated(f, 1)[-1][1] == "UpdatedWithError"
    assert invalid_values(f) == [
        "ConfigMap nginx-ingress/nginx-config 'ingress-template' is not supported by "
        "ferryman (ferryman renders its own templates; routing is not configuration text), "
        "ignoring"
    ]
    event = last_event(f, "cafe-ingress")
    assert (event["type"], event["reason"]) == ("Warning", "AddedOrUpdatedWithWarning")
    for name in ("rate-limiting", "rate-limiting-burst", "rate-limiting-rate"):
        assert (
            f"annotation custom.nginx.org/{name}: custom annotations take effect through "
            "NIC's custom templates, which ferryman does not have: ignored"
        ) in event["message"]
    assert [f.get(HOST, "/tea").served_by for _ in range(5)] == ["tea"] * 5


def test_health_checks(ferryman: Ferryman, backends: Backends) -> None:
    """The README's Ingress asks for NGINX Plus's active health checks
    (nginx.com/health-checks): on open-source NGINX, NIC rejects it with
    "annotation requires NGINX Plus"; so does ferryman, rather than serve
    without the checks asked for. Another Ingress is still served."""
    f = ferryman
    _cafe(f, backends)
    f.write_text("health-checks.yaml", readme_blocks("health-checks", "Ingress")[0])
    f.write(
        "other",
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": {"name": "other", "namespace": "default"},
            "spec": {
                "ingressClassName": "nginx",
                "rules": [
                    {
                        "host": "other.example.com",
                        "http": {
                            "paths": [
                                {
                                    "path": "/",
                                    "pathType": "Prefix",
                                    "backend": {
                                        "service": {"name": "tea-svc", "port": {"number": 80}}
                                    },
                                }
                            ]
                        },
                    }
                ],
            },
        },
    )
    f.start()
    event = last_event(f, "cafe-ingress")
    assert (event["type"], event["reason"]) == ("Warning", "Rejected"), event
    assert (
        "annotations.nginx.com/health-checks: Forbidden: annotation requires NGINX Plus"
        in event["message"]
    )
    assert f.get(HOST, "/tea").status == 404
    assert f.get("other.example.com", "/").served_by == "tea"


def test_jwt(ferryman: Ferryman, backends: Backends) -> None:
    """The README's JWT annotations (nginx.com/jwt-*) are NGINX Plus's in NIC, which
    rejects them on open-source NGINX: so does ferryman (its JWT validation is
    the jwt Policy's, on VirtualServers), rather than serve the paths without
    the validation asked for. Example 2's master is served; its minions are
    rejected, so their paths answer 404."""
    f = ferryman
    _cafe(f, backends)
    f.write("tls", tls_secret("cafe-secret", [HOST]))
    master, tea, coffee = readme_blocks("jwt", "Ingress")[1:]
    f.write_text("jwt-master.yaml", master)
    f.write_text("jwt-tea.yaml", tea)
    f.write_text("jwt-coffee.yaml", coffee)
    f.start()
    for name in ("cafe-ingress-tea-minion", "cafe-ingress-coffee-minion"):
        event = last_event(f, name)
        assert (event["type"], event["reason"]) == ("Warning", "Rejected"), event
        for annotation in ("jwt-key", "jwt-login-url", "jwt-realm", "jwt-token"):
            assert (
                f"annotations.nginx.com/{annotation}: Forbidden: annotation requires NGINX Plus"
            ) in event["message"]
    assert f.get(HOST, "/tea", https=True).status == 404
    assert f.get(HOST, "/coffee", https=True).status == 404
    assert last_event(f, "cafe-ingress-master")["reason"] == "AddedOrUpdated"


def test_jwt_v1beta1_listing(ferryman: Ferryman, backends: Backends) -> None:
    """README example 1 (serviceName/servicePort, v1beta1's backend under
    networking.k8s.io/v1): rejected for its missing fields and its Plus-only
    annotations."""
    f = ferryman
    _cafe(f, backends)
    f.write("tls", tls_secret("cafe-secret", [HOST]))
    f.write_text("jwt.yaml", readme_blocks("jwt", "Ingress")[0])
    f.start()
    event = last_event(f, "cafe-ingress")
    assert (event["type"], event["reason"]) == ("Warning", "Rejected"), event
    assert "spec.rules[0].http.paths[0].backend.serviceName: v1beta1's field" in (event["message"])
    assert (
        "annotations.nginx.com/jwt-key: Forbidden: annotation requires NGINX Plus"
        in (event["message"])
    )
    assert f.get(HOST, "/tea").status == 404


def test_tcp_udp_stream_snippets(ferryman: Ferryman, backends: Backends) -> None:
    """tcp-udp configures DNS load balancing with the ConfigMap's stream-snippets
    (raw NGINX text): ferryman takes no snippets; the key is refused by name and
    the rest of the configuration applies (HTTP still served)."""
    f = ferryman
    _cafe(f, backends)
    f.extra_args += ["--nginx-configmaps", "nginx-ingress/nginx-config"]
    example(f, "tcp-udp", "nginx-config.yaml")
    example(f, "empty-host", "cafe-ingress.yaml")
    f.write(
        "svc",
        service_with_backends("coredns", [backends.start("dns")], port=53, port_name="dns-tcp"),
    )
    f.start()
    assert _updated(f, 1)[-1][1] == "UpdatedWithError"
    assert invalid_values(f) == [
        "ConfigMap nginx-ingress/nginx-config 'stream-snippets' is not supported by "
        "ferryman (snippets are off in ferryman: raw NGINX text is never taken from "
        "resources), ignoring"
    ]
    assert f.get("any.test", "/tea").served_by == "tea"
