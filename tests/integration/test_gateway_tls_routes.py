"""TLSRoutes in manifests mode through real NGINX and real TLS backends: a
Gateway's TLS listener (mode Passthrough) passes each connection, still
encrypted, to the backend of the TLSRoute that names its SNI name (the client
sees the backend's own certificate), wildcard names cover every depth, a name
no route takes is closed, and route changes go live without a reload, beside
HTTP listeners of the same Gateway. A TLS listener of mode Terminate ends TLS
with its own certificate and passes the plain bytes on; routes and
certificates change without a reload there too."""

from __future__ import annotations

import base64
import json
import ssl
from collections.abc import Iterator
from typing import Any

import pytest

from testkit.gateway_docs import gateway, gateway_class, route, served, to
from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    free_port,
    service_with_backends,
    tls_secret,
)
from testkit.tls_backends import TlsBackend, https, start_tls_backend

POOL = ("127.0.0.20", "127.0.0.21")


def tls_route(name: str, parent: str, hostnames: list[str], service: str) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "TLSRoute",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "parentRefs": [{"name": parent}],
            "hostnames": hostnames,
            "rules": [{"backendRefs": [{"name": service, "port": 8443}]}],
        },
    }


def passthrough(name: str, port: int, hostname: str | None = None) -> dict[str, Any]:
    listener: dict[str, Any] = {
        "name": name, "port": port, "protocol": "TLS", "tls": {"mode": "Passthrough"},
    }  # fmt: skip
    if hostname:
        listener["hostname"] = hostname
    return listener


@pytest.fixture
def tls_backends() -> Iterator[dict[str, TlsBackend]]:
    started = {
        "app": start_tls_backend("app", ["app.example.com"]),
        "shop": start_tls_backend("shop", ["*.shop.example.com"]),
    }
    yield started
    for backend in started.values():
        backend.close()


@pytest.fixture
def gw(ferryman: Ferryman, tls_backends: dict[str, TlsBackend]) -> Ferryman:
    for name, backend in tls_backends.items():
        ferryman.write(f"svc-{name}", service_with_backends(name, [backend], port=8443))
    ferryman.write("class", gateway_class())
    ferryman.extra_args += [
        "--enable-gateway-api",
        "--gateway-addresses",
        f"{POOL[0]}-{POOL[-1]}",
    ]
    return ferryman


def backend_of(address: str, port: int, host: str) -> str:
    """Which TLS backend answered a connection with SNI ``host`` (its line),
    "closed" when the connection was closed in the handshake."""
    try:
        _, response = https(port, host, address)
    except (OSError, ssl.SSLError):
        return "closed"
    return response.rsplit("hello from pod ", 1)[-1].strip() if "hello" in response else response


def test_tls_routes_pass_each_sni_name_to_its_backend(
    gw: Ferryman, tls_backends: dict[str, TlsBackend], backends: Backends
) -> None:
    port, http_port = free_port(), free_port()
    gw.write("svc-tea", service_with_backends("tea", [backends.start("tea")]))
    gw.write(
        "gateways",
        gateway(
            "one",
            [
                passthrough("tls", port, "*.example.com"),
                {"name": "http", "port": http_port, "protocol": "HTTP"},
            ],
        ),
    )
    gw.write(
        "routes",
        tls_route("app", "one", ["app.example.com"], "app"),
        tls_route("shop", "one", ["*.shop.example.com"], "shop"),
        route("tea", "one", ["cafe.example.com"], [to("tea")]),
    )
    gw.start()
    address = POOL[0]
    certificate, response = https(port, "app.example.com", address)
    # Not decrypted on the way: the client sees the backend's own certificate.
    assert certificate == tls_backends["app"].certificate
    assert "hello from pod app" in response
    assert backend_of(address, port, "a.shop.example.com") == "shop"
    # The Gateway API's wildcards cover every depth.
    assert backend_of(address, port, "a.b.shop.example.com") == "shop"
    # A name no route takes, and one outside the listener's hostname: closed.
    assert backend_of(address, port, "other.example.com") == "closed"
    assert backend_of(address, port, "app.example.org") == "closed"
    # The same Gateway's HTTP listener serves its HTTPRoute beside them.
    assert served(address, http_port, "cafe.example.com") == "tea"


def test_tls_route_changes_go_live_without_reloads(gw: Ferryman) -> None:
    port = free_port()
    gw.write("gateways", gateway("one", [passthrough("tls", port)]))
    gw.write("routes", tls_route("r1", "one", ["app.example.com"], "app"))
    gw.start()
    address = POOL[0]
    assert backend_of(address, port, "app.example.com") == "app"
    reloads = gw.reloads()
    gw.write("routes", tls_route("r1", "one", ["app.example.com"], "shop"))
    eventually(lambda: backend_of(address, port, "app.example.com") == "shop", what="edit")
    gw.write(
        "routes",
        tls_route("r1", "one", ["app.example.com"], "shop"),
        tls_route("r2", "one", ["new.example.com"], "app"),
    )
    eventually(lambda: backend_of(address, port, "new.example.com") == "app", what="add")
    gw.write("routes", tls_route("r2", "one", ["new.example.com"], "app"))
    eventually(lambda: backend_of(address, port, "app.example.com") == "closed", what="delete")
    assert gw.reloads() == reloads
    # A second Gateway is a new socket: one reload.
    gw.write(
        "gateways",
        gateway("one", [passthrough("tls", port)]),
        gateway("two", [passthrough("tls", port)]),
    )
    gw.write(
        "routes",
        tls_route("r2", "one", ["new.example.com"], "app"),
        tls_route("r3", "two", ["app.example.com"], "shop"),
    )
    eventually(lambda: backend_of(POOL[1], port, "app.example.com") == "shop", what="gateway")
    assert backend_of(address, port, "app.example.com") == "closed"
    gw.reloads_reach(reloads + 1)


def test_a_tls_route_with_an_older_claim_on_its_name_is_not_served_there(gw: Ferryman) -> None:
    """Two TLSRoutes naming one SNI name on one listener: the older keeps it."""
    port = free_port()
    gw.write("gateways", gateway("one", [passthrough("tls", port)]))
    older = tls_route("older", "one", ["app.example.com"], "app")
    older["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    newer = tls_route("newer", "one", ["app.example.com", "only.example.com"], "shop")
    newer["metadata"]["creationTimestamp"] = "2026-06-01T00:00:00Z"
    gw.write("routes", newer, older)
    gw.start()
    assert backend_of(POOL[0], port, "app.example.com") == "app"
    assert backend_of(POOL[0], port, "only.example.com") == "shop"


def test_a_transport_servers_change_leaves_the_tls_routes(
    gw: Ferryman, tls_backends: dict[str, TlsBackend]
) -> None:
    """TransportServers and TLSRoutes share the stream records: a passthrough
    TransportServer added or removed used to remove every S record it had not
    written, the Gateway's with them, and its TLSRoute's connections were closed
    until the Gateway changed."""
    from testkit.transport_docs import transport_server

    port = free_port()
    gw.extra_args += ["--enable-tls-passthrough"]
    gw.write("gateways", gateway("one", [passthrough("tls", port)]))
    gw.write("routes", tls_route("r1", "one", ["app.example.com"], "app"))
    gw.start()
    address = POOL[0]
    assert backend_of(address, port, "app.example.com") == "app"
    ts = transport_server("ts", "tls-passthrough", "TLS_PASSTHROUGH", "shop", 8443, host="ts.test")
    gw.write("ts", ts)
    eventually(lambda: https(gw.https_port, "ts.test")[0] == tls_backends["shop"].certificate)
    assert backend_of(address, port, "app.example.com") == "app"
    gw.remove("ts")
    eventually(lambda: backend_of("127.0.0.1", gw.https_port, "ts.test") != "shop", what="gone")
    assert backend_of(address, port, "app.example.com") == "app"


def terminate(name: str, port: int, secret: str, hostname: str) -> dict[str, Any]:
    return {
        "name": name, "port": port, "protocol": "TLS", "hostname": hostname,
        "tls": {"mode": "Terminate", "certificateRefs": [{"name": secret}]},
    }  # fmt: skip


def plain_backend_of(address: str, port: int, host: str) -> tuple[bytes, str]:
    """(the certificate the listener presented, the plain HTTP backend that
    answered), ("", "closed") when the handshake or connection was refused."""
    try:
        der, response = https(port, host, address)
    except (OSError, ssl.SSLError):
        return b"", "closed"
    if not response:
        return der, "closed"  # after the handshake
    body = response.split("\r\n\r\n", 1)[-1]
    try:
        return der, str(json.loads(body)["name"])
    except (ValueError, KeyError):
        return der, response


def certificate_of(secret: list[dict[str, Any]] | dict[str, Any]) -> bytes:
    doc = secret[0] if isinstance(secret, list) else secret
    pem = base64.b64decode(doc["data"]["tls.crt"]).decode()
    return ssl.PEM_cert_to_DER_cert(pem)


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_a_terminating_tls_listener_ends_tls_and_passes_plain_bytes(
    gw: Ferryman, backends: Backends
) -> None:
    port = free_port()
    for name in ("tea", "coffee"):
        gw.write(f"svc-{name}", service_with_backends(name, [backends.start(name)], port=8443))
    site = tls_secret("site", ["*.example.com"])
    gw.write("secret", site)
    gw.write("gateways", gateway("one", [terminate("tls", port, "site", "*.example.com")]))
    gw.write(
        "routes",
        tls_route("app", "one", ["app.example.com"], "tea"),
        tls_route("shop", "one", ["*.shop.example.com"], "coffee"),
    )
    gw.start()
    address = POOL[0]
    # The listener's certificate, and the plain backend behind it.
    assert plain_backend_of(address, port, "app.example.com") == (certificate_of(site), "tea")
    # Wildcards cover every depth, for routes and for the listener's certificate.
    assert plain_backend_of(address, port, "a.b.shop.example.com")[1] == "coffee"
    # A name no route takes: closed; one outside the listener's hostname: no certificate.
    assert plain_backend_of(address, port, "other.example.com")[1] == "closed"
    assert plain_backend_of(address, port, "app.example.org")[1] == "closed"
    reloads = gw.reloads()
    gw.write(
        "routes",
        tls_route("app", "one", ["app.example.com"], "coffee"),
        tls_route("shop", "one", ["*.shop.example.com"], "coffee"),
    )
    eventually(lambda: plain_backend_of(address, port, "app.example.com")[1] == "coffee")
    rotated = tls_secret("site", ["*.example.com"])
    gw.write("secret", rotated)
    eventually(
        lambda: plain_backend_of(address, port, "app.example.com")[0] == certificate_of(rotated),
        what="rotated certificate",
    )
    assert gw.reloads() == reloads
