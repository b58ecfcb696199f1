"""TLS termination from kubernetes.io/tls Secrets, per host by SNI."""

from __future__ import annotations

import socket
import ssl

import pytest

from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    ingress,
    path,
    rule,
    service_with_backends,
    tls_secret,
)

pytestmark = pytest.mark.flavours("nginx", "nginx-1.30", "angie")


def _peer_cert_names(port: int, sni: str) -> list[str]:
    from cryptography import x509

    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname=sni) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    cert = x509.load_der_x509_certificate(der)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    return list(san.value.get_values_for_type(x509.DNSName))


def _start(
    ferryman: Ferryman, backends: Backends, annotations: dict[str, str] | None = None
) -> None:
    ferryman.write("svc", service_with_backends("web", [backends.start("web")]))
    ferryman.write("secret-a", tls_secret("a-tls", ["a.example.com"]))
    ferryman.write(
        "ing",
        ingress(
            "tls",
            [rule("a.example.com", path("/", "web")), rule("b.example.com", path("/", "web"))],
            tls=[
                {"hosts": ["a.example.com"], "secretName": "a-tls"},
                {"hosts": ["b.example.com"], "secretName": "missing-tls"},
            ],
            annotations=annotations,
        ),
    )
    ferryman.start()


def test_https_serves_the_hosts_certificate(ferryman: Ferryman, backends: Backends) -> None:
    _start(ferryman, backends)
    assert _peer_cert_names(ferryman.https_port, "a.example.com") == ["a.example.com"]
    r = ferryman.get("a.example.com", "/x", https=True)
    assert r.status == 200
    assert r.served_by == "web"
    assert r.json()["headers"]["x-forwarded-proto"] == "https"


def test_tls_1_3_is_offered(ferryman: Ferryman, backends: Backends) -> None:
    # NGINX 1.22 (Debian 12) offers TLS 1.0-1.2 unless told otherwise.
    _start(ferryman, backends)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    with (
        socket.create_connection(("127.0.0.1", ferryman.https_port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname="a.example.com") as tls,
    ):
        assert tls.version() == "TLSv1.3"


def test_missing_secret_rejects_handshakes_for_that_host_only(
    ferryman: Ferryman, backends: Backends
) -> None:
    _start(ferryman, backends)
    with pytest.raises(ssl.SSLError):
        _peer_cert_names(ferryman.https_port, "b.example.com")
    with pytest.raises(ssl.SSLError):
        _peer_cert_names(ferryman.https_port, "unknown.example.com")
    assert ferryman.get("a.example.com", "/", https=True).status == 200
    ev = ferryman.events_for("tls")[-1]
    assert ev["reason"] == "AddedOrUpdatedWithWarning"
    assert "default/missing-tls" in ev["message"]


def test_secret_added_later_enables_tls(ferryman: Ferryman, backends: Backends) -> None:
    _start(ferryman, backends)
    ferryman.write("secret-b", tls_secret("missing-tls", ["b.example.com"]))
    eventually(
        lambda: _peer_cert_names(ferryman.https_port, "b.example.com") == ["b.example.com"],
        60,
        "certificate for b",
    )


def test_invalid_secret_is_rejected_without_breaking_others(
    ferryman: Ferryman, backends: Backends
) -> None:
    bad = tls_secret("missing-tls", ["b.example.com"])
    bad["data"]["tls.key"] = tls_secret("other", ["c.example.com"])["data"]["tls.key"]
    ferryman.write("secret-b", bad)
    _start(ferryman, backends)
    with pytest.raises(ssl.SSLError):
        _peer_cert_names(ferryman.https_port, "b.example.com")
    assert ferryman.get("a.example.com", "/", https=True).status == 200
    ev = ferryman.events_for("tls")[-1]
    assert "does not match" in ev["message"]
    assert ferryman.metrics()["nginx_ingress_controller_nginx_reload_errors_total"] == 0


def test_plain_http_redirects_to_https(ferryman: Ferryman, backends: Backends) -> None:
    _start(ferryman, backends)
    r = ferryman.get("a.example.com", "/coffee?x=1")
    assert r.status == 301
    assert r.headers["location"] == f"https://a.example.com:{ferryman.https_port}/coffee?x=1"


def test_ssl_redirect_annotation_can_turn_redirect_off(
    ferryman: Ferryman, backends: Backends
) -> None:
    _start(ferryman, backends, {"nginx.org/ssl-redirect": "false"})
    r = ferryman.get("a.example.com", "/coffee")
    assert r.status == 200
    assert r.served_by == "web"
    assert ferryman.get("a.example.com", "/", https=True).status == 200


def test_certificate_rotation_serves_the_new_certificate(
    ferryman: Ferryman, backends: Backends
) -> None:
    _start(ferryman, backends)
    reloads = ferryman.reloads()
    ferryman.write("secret-a", tls_secret("a-tls", ["a.example.com", "rotated.example.com"]))
    eventually(
        lambda: "rotated.example.com" in _peer_cert_names(ferryman.https_port, "a.example.com"),
        60,
        "rotated certificate",
    )
    # Certificates travel without a reload, on every server.
    assert ferryman.reloads() == reloads
    assert ferryman.get("a.example.com", "/", https=True).served_by == "web"


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_each_http2_stream_carries_the_https_port(ferryman: Ferryman, backends: Backends) -> None:
    """A connection's local address is learnt once, at its handshake, and every
    stream after it forwards the HTTPS port it came in on."""
    import httpx

    from testkit.configmap_docs import NAME, NS, configmap

    ferryman.extra_args += ["--nginx-configmaps", f"{NS}/{NAME}"]
    ferryman.write("configmap", configmap(http2="true"))
    _start(ferryman, backends)
    with httpx.Client(http2=True, verify=False, timeout=20) as c:
        for _ in range(3):
            r = c.get(
                f"https://127.0.0.1:{ferryman.https_port}/",
                headers={"Host": "a.example.com"},
                extensions={"sni_hostname": "a.example.com"},
            )
            assert r.http_version == "HTTP/2"
            assert r.json()["headers"]["x-forwarded-port"] == str(ferryman.https_port)
