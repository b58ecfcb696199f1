"""TLS passthrough (--enable-tls-passthrough) through real NGINX: the HTTPS port
reads the SNI name; a passthrough TransportServer's host reaches its backend
undecrypted (the client sees the backend's certificate) while every other host
on the same port still terminates in NGINX, with the client's address kept.
Host ownership is shared with Ingresses (oldest wins). NIC's tls-passthrough
example applies unchanged."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from typing import Any

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
from testkit.nic_fixtures import NIC_EXAMPLES
from testkit.tls_backends import TlsBackend, https, start_tls_backend
from testkit.transport_docs import transport_server


@pytest.fixture
def tls_backend() -> Iterator[TlsBackend]:
    backend = start_tls_backend("secure-app", ["app.example.com"])
    yield backend
    backend.close()


def secure_app_endpoints(port: int) -> dict[str, Any]:
    """The EndpointSlice the cluster would make for secure-app.yaml's pod."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "secure-app-abcde",
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": "secure-app"},
        },
        "addressType": "IPv4",
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
    }


def _secure_app(ferryman: Ferryman, tls_backend: TlsBackend) -> None:
    folder = NIC_EXAMPLES / "tls-passthrough"
    for name in ("secure-app.yaml", "transport-server-passthrough.yaml"):
        ferryman.write_text(f"tls-passthrough-{name}", (folder / name).read_text())
    ferryman.write("endpoints", secure_app_endpoints(tls_backend.port))


def test_nic_tls_passthrough_example(ferryman: Ferryman, tls_backend: TlsBackend) -> None:
    """README: curl https://app.example.com --insecure answers "hello from pod ..."."""
    _secure_app(ferryman, tls_backend)
    ferryman.extra_args += ["--enable-tls-passthrough"]
    ferryman.start()
    certificate, response = https(ferryman.https_port, "app.example.com")
    assert certificate == tls_backend.certificate
    assert response.endswith("hello from pod secure-app\n"), response
    event = ferryman.events_for("secure-app")[-1]
    assert (event["reason"], event["message"]) == (
        "AddedOrUpdated",
        "Configuration for default/secure-app was added or updated ",
    )


def test_other_hosts_still_terminate_in_nginx(
    ferryman: Ferryman, tls_backend: TlsBackend, backends: Backends
) -> None:
    _secure_app(ferryman, tls_backend)
    ferryman.write("cafe", service_with_backends("cafe", [backends.start("cafe")]))
    ferryman.write("secret", tls_secret("cafe-tls", ["cafe.example.com"]))
    ferryman.write(
        "ing",
        ingress(
            "cafe",
            [rule("cafe.example.com", path("/", "cafe"))],
            tls=[{"hosts": ["cafe.example.com"], "secretName": "cafe-tls"}],
        ),
    )
    ferryman.extra_args += ["--enable-tls-passthrough"]
    ferryman.start()
    reloads = ferryman.reloads()
    certificate, _ = https(ferryman.https_port, "app.example.com")
    assert certificate == tls_backend.certificate
    r = ferryman.get("cafe.example.com", "/", https=True)
    assert r.served_by == "cafe"
    # The client's address crossed the internal hop (PROXY protocol), not "unix:".
    assert r.json()["headers"]["x-real-ip"] == "127.0.0.1"
    # And the port it connected to (a unix socket has none).
    assert r.json()["headers"]["x-forwarded-port"] == str(ferryman.https_port)
    cafe_certificate, _ = https(ferryman.https_port, "cafe.example.com")
    assert cafe_certificate not in (b"", tls_backend.certificate)
    # Plain HTTP is untouched: redirected to the HTTPS port, as without passthrough.
    r = ferryman.get("cafe.example.com", "/")
    assert (r.status, r.headers["location"]) == (
        301,
        f"https://cafe.example.com:{ferryman.https_port}/",
    )
    assert ferryman.reloads() == reloads


def test_passthrough_hosts_are_owned_with_ingresses(
    ferryman: Ferryman, tls_backend: TlsBackend, backends: Backends
) -> None:
    """An older Ingress keeps app.example.com: the TransportServer is told NIC's
    message; once the Ingress goes, the TransportServer takes the host."""
    _secure_app(ferryman, tls_backend)
    ferryman.write("app", service_with_backends("app", [backends.start("ingress-app")]))
    ferryman.write("secret", tls_secret("app-tls", ["app.example.com"]))
    ferryman.write(
        "ing",
        ingress(
            "app",
            [rule("app.example.com", path("/", "app"))],
            tls=[{"hosts": ["app.example.com"], "secretName": "app-tls"}],
            created="2020-01-01T00:00:00Z",
        ),
    )
    ferryman.extra_args += ["--enable-tls-passthrough"]
    ferryman.start()
    event = ferryman.events_for("secure-app")[-1]
    assert (event["reason"], event["message"]) == (
        "Rejected",
        "Host is taken by another resource",
    )
    certificate, _ = https(ferryman.https_port, "app.example.com")
    assert certificate != tls_backend.certificate  # NGINX terminates it for the Ingress
    ferryman.remove("ing")
    eventually(
        lambda: https(ferryman.https_port, "app.example.com")[0] == tls_backend.certificate,
        what="the TransportServer takes the host",
    )
    ferryman.last_event("secure-app", "AddedOrUpdated")


def test_a_wildcard_passthrough_host(ferryman: Ferryman, tls_backend: TlsBackend) -> None:
    ferryman.write("endpoints", secure_app_endpoints(tls_backend.port))
    ferryman.write_text(
        "svc.yaml",
        (NIC_EXAMPLES / "tls-passthrough" / "secure-app.yaml").read_text(),
    )
    ferryman.write(
        "ts",
        transport_server(
            "wild",
            "tls-passthrough",
            "TLS_PASSTHROUGH",
            "secure-app",
            8443,
            host="*.example.com",
        ),
    )
    ferryman.extra_args += ["--enable-tls-passthrough"]
    ferryman.start()
    assert https(ferryman.https_port, "any.example.com")[0] == tls_backend.certificate
    # One label only, as NIC's server_name: the others reach NGINX's HTTPS server,
    # which refuses a handshake for a host no Ingress serves (the backend would not).
    for name in ("example.com", "a.b.example.com"):
        with pytest.raises(ssl.SSLError, match="INTERNAL_ERROR"):
            https(ferryman.https_port, name)
