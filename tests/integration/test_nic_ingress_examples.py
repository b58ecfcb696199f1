"""NIC's own Ingress examples (../shared/vendor/nic-examples-v5.5.4/ingress-resources),
applied unchanged (the manifest files, or the Ingress a README shows), behave as
their READMEs say, through real NGINX with no reload. mergeable-ingress-types:
tests/integration/test_ingress_mergeable.py."""

from __future__ import annotations

import base64
import re
import subprocess

from testkit.grpc_greeter import Greeter, say_hello
from testkit.harness import (
    Backends,
    Ferryman,
    served_by,
    service_with_backends,
    tls_secret,
)
from testkit.nic_ingress_examples import EXAMPLES, HOST, _cafe
from testkit.nic_policy_examples import _basic, _secret
from testkit.upstream_fields import _TLSEcho


def _readme_ingress(f: Ferryman, folder: str) -> None:
    """The README's Ingress manifest (its last yaml block with ``kind: Ingress``)."""
    text = (EXAMPLES / folder / "README.md").read_text()
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if "kind: Ingress" in b]
    f.write_text(f"{folder}-ingress.yaml", blocks[-1])


def test_rewrites(ferryman: Ferryman, backends: Backends) -> None:
    """README: /tea/ -> /, /tea/abc -> /abc, /coffee/ -> /beans/, /coffee/abc ->
    /beans/abc; /tea and /coffee are redirected to /tea/ and /coffee/."""
    _cafe(ferryman, backends)
    _readme_ingress(ferryman, "rewrites")
    ferryman.start()

    def sent(p: str) -> str:
        return str(ferryman.get(HOST, p).json()["path"])

    assert (sent("/tea/"), sent("/tea/abc")) == ("/", "/abc")
    assert (sent("/coffee/"), sent("/coffee/abc")) == ("/beans/", "/beans/abc")
    r = ferryman.get(HOST, "/tea")
    assert r.status == 301 and r.headers["location"].endswith("/tea/")
    assert ferryman.reloads() == 1


def test_ssl_services(ferryman: Ferryman, backends: Backends) -> None:
    """README: /ssl is proxied over HTTPS to ssl-svc; /tea and /coffee over HTTP."""
    _cafe(ferryman, backends)
    secure = _TLSEcho("ssl")
    try:
        ferryman.write("ssl", service_with_backends("ssl-svc", [secure], port=443))
        _readme_ingress(ferryman, "ssl-services")
        ferryman.start()
        assert served_by(ferryman, HOST, "/ssl") == "ssl"
        assert served_by(ferryman, HOST, "/tea") == "tea"
        assert ferryman.events_for("cafe-ingress")[-1]["reason"] == "AddedOrUpdated"
    finally:
        secure.close()


def test_websocket(ferryman: Ferryman, backends: Backends) -> None:
    """README: /ws reaches ws-svc with the WebSocket upgrade."""
    _cafe(ferryman, backends)
    ferryman.write("ws", service_with_backends("ws-svc", [backends.start("ws")], port=8008))
    _readme_ingress(ferryman, "websocket")
    ferryman.start()
    r = ferryman.get(HOST, "/ws", headers={"Upgrade": "websocket", "Connection": "Upgrade"})
    assert r.served_by == "ws"
    h = r.json()["headers"]
    assert (h["upgrade"], h["connection"]) == ("websocket", "upgrade")


def _grpc_services(f: Ferryman, backends: Backends, greeter: Greeter, http2: bool) -> bytes:
    """The README's Ingress, its Services and Secret, and a ConfigMap with
    http2 on or off (the README's prerequisite); the certificate."""
    _cafe(f, backends)
    f.extra_args += ["--nginx-configmaps", "default/nginx-config"]
    data = {"http2": "true" if http2 else "false"}
    f.write(
        "configmap",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "nginx-config", "namespace": "default"},
            "data": data,
        },
    )
    f.write("grpc", service_with_backends("grpc-svc", [greeter], port=50051))  # type: ignore[list-item]
    secret = tls_secret("grpc-secret", ["grpc.example.com"])
    f.write("secret", secret)
    _readme_ingress(f, "grpc-services")
    return base64.b64decode(secret["data"]["tls.crt"])


def test_grpc_services(ferryman: Ferryman, backends: Backends) -> None:
    """README: grpc-svc answers gRPC at /helloworld.Greeter (grpc_pass), tea and
    coffee HTTP on the same host; no reload."""
    greeter = Greeter("greeter")
    try:
        root = _grpc_services(ferryman, backends, greeter, http2=True)
        ferryman.start()
        answer = say_hello(ferryman.https_port, "grpc.example.com", root)
        assert (answer["name"], answer["message"]) == ("greeter", "Hello ferryman")
        assert ferryman.get("grpc.example.com", "/tea", https=True).served_by == "tea"
        assert ferryman.events_for("grpc-ingress")[-1]["reason"] == "AddedOrUpdated"
        assert ferryman.reloads() == 1
    finally:
        greeter.close()


def test_grpc_services_without_http2(ferryman: Ferryman, backends: Backends) -> None:
    """NIC ignores the annotation without the ConfigMap's http2 ("requires
    HTTP2, ignoring"): a Warning, and the paths are proxied as HTTP/1.1."""
    greeter = Greeter("greeter")
    try:
        _grpc_services(ferryman, backends, greeter, http2=False)
        ferryman.start()
        assert ferryman.get("grpc.example.com", "/tea", https=True).served_by == "tea"
        event = ferryman.events_for("grpc-ingress")[-1]
        assert event["reason"] == "AddedOrUpdatedWithWarning"
        assert "nginx.org/grpc-services: requires HTTP2" in event["message"]
    finally:
        greeter.close()


def test_basic_auth(ferryman: Ferryman, backends: Backends) -> None:
    """README: without credentials 401 Authorization Required; -u foo:bar coffee."""
    _cafe(ferryman, backends)
    hashed = subprocess.run(
        ["openssl", "passwd", "-apr1", "bar"], capture_output=True, text=True, check=True
    ).stdout.strip()
    htpasswd = f"foo:{hashed}\n".encode()
    ferryman.write("passwd", _secret("cafe-passwd", "nginx.org/htpasswd", {"htpasswd": htpasswd}))
    ferryman.write("tls", tls_secret("tls-secret", [HOST]))
    ferryman.write_text("ingress.yaml", (EXAMPLES / "basic-auth" / "cafe-ingress.yaml").read_text())
    ferryman.start()
    r = ferryman.get(HOST, "/coffee", https=True)
    assert r.status == 401 and "401 Authorization Required" in r.text
    assert r.headers["www-authenticate"] == 'Basic realm="Cafe App"'
    assert ferryman.get(HOST, "/coffee", https=True, headers=_basic("foo", "bar")).served_by == (
        "coffee"
    )
    assert ferryman.reloads() == 1


def test_complete_example(ferryman: Ferryman, backends: Backends) -> None:
    """README: https /tea and /coffee; plain HTTP redirected (TLS: ssl-redirect)."""
    _cafe(ferryman, backends)
    ferryman.write("tls", tls_secret("tls-secret", [HOST]))
    ferryman.write_text(
        "ingress.yaml", (EXAMPLES / "complete-example" / "cafe-ingress.yaml").read_text()
    )
    ferryman.start()
    assert ferryman.get(HOST, "/tea", https=True).served_by == "tea"
    assert ferryman.get(HOST, "/coffee").status == 301
