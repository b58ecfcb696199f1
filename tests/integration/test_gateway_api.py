"""Gateway API in manifests mode through real NGINX and real backends: each
Gateway on its own address of --gateway-addresses, HTTPRoutes attached by
listener and hostname, HTTPS listeners with their certificates, route changes
without reloads, and a hostname claimed by an Ingress and a Gateway."""

from __future__ import annotations

import socket
import ssl

import httpx
import pytest

from testkit.gateway_docs import gateway, gateway_class, get_at, route, served, to
from testkit.harness import (
    Backends,
    Ferryman,
    _insecure_context,
    eventually,
    free_port,
    service_with_backends,
    tls_secret,
)

POOL = ("127.0.0.10", "127.0.0.11", "127.0.0.12")


@pytest.fixture
def gw(ferryman: Ferryman, backends: Backends) -> Ferryman:
    for name in ("tea", "coffee", "juice"):
        ferryman.write(name, service_with_backends(name, [backends.start(name)]))
    ferryman.write("class", gateway_class())
    ferryman.extra_args += [
        "--enable-gateway-api",
        "--gateway-addresses",
        f"{POOL[0]}-{POOL[-1]}",
    ]
    return ferryman


def test_routes_on_each_gateways_own_address(gw: Ferryman) -> None:
    """Two Gateways on one port: each listens on its own address, and a route
    is served only on the Gateway it attaches to, by path and hostname."""
    port = free_port()
    listener = [{"name": "http", "port": port, "protocol": "HTTP"}]
    gw.write("gateways", gateway("one", listener), gateway("two", listener))
    gw.write(
        "routes",
        route("r1", "one", ["cafe.example.com"], [to("tea", "/tea"), to("coffee", "/")]),
        route("r2", "two", ["cafe.example.com"], [to("juice")]),
    )
    gw.start()
    one, two = POOL[0], POOL[1]
    assert served(one, port, "cafe.example.com", "/tea/cup") == "tea"
    assert served(one, port, "cafe.example.com", "/teapot") == "coffee"
    assert served(one, port, "cafe.example.com", "/") == "coffee"
    assert served(two, port, "cafe.example.com", "/tea") == "juice"
    # Another hostname: no route takes it on either Gateway.
    assert served(one, port, "other.example.com", "/tea") == "404"
    # The third address of the pool belongs to no Gateway: nothing listens.
    with pytest.raises(httpx.ConnectError):
        get_at(POOL[2], port, "cafe.example.com")


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_route_changes_go_live_without_reloads(gw: Ferryman) -> None:
    port = free_port()
    gw.write("gateways", gateway("one", [{"name": "http", "port": port, "protocol": "HTTP"}]))
    gw.write("routes", route("r1", "one", ["cafe.example.com"], [to("tea")]))
    gw.start()
    address = POOL[0]
    assert served(address, port, "cafe.example.com") == "tea"
    reloads = gw.reloads()
    gw.write("routes", route("r1", "one", ["cafe.example.com"], [to("coffee")]))
    eventually(lambda: served(address, port, "cafe.example.com") == "coffee", what="edit")
    gw.write(
        "routes",
        route("r1", "one", ["cafe.example.com"], [to("coffee")]),
        route("r2", "one", ["bar.example.com"], [to("juice", "/juice", "Exact")]),
    )
    eventually(lambda: served(address, port, "bar.example.com", "/juice") == "juice", what="add")
    assert served(address, port, "bar.example.com", "/juice/more") == "404"
    gw.write("routes", route("r2", "one", ["bar.example.com"], [to("juice", "/juice", "Exact")]))
    eventually(lambda: served(address, port, "cafe.example.com") == "404", what="delete")
    assert gw.reloads() == reloads
    # A new Gateway is a new socket: one reload.
    gw.write(
        "gateways",
        gateway("one", [{"name": "http", "port": port, "protocol": "HTTP"}]),
        gateway("two", [{"name": "http", "port": port, "protocol": "HTTP"}]),
    )
    gw.write(
        "routes",
        route("r2", "one", ["bar.example.com"], [to("juice", "/juice", "Exact")]),
        route("r3", "two", [], [to("tea")]),
    )
    eventually(lambda: served(POOL[1], port, "any.example.com") == "tea", what="new gateway")
    assert gw.reloads() == reloads + 1


def test_listener_hostnames_pick_the_most_specific_listener(gw: Ferryman) -> None:
    """A wildcard listener and an exact one on one port: a name the exact one
    has is never served by the wildcard's routes, even with none of its own."""
    port = free_port()
    listeners = [
        {"name": "wild", "port": port, "protocol": "HTTP", "hostname": "*.example.com"},
        {"name": "exact", "port": port, "protocol": "HTTP", "hostname": "tea.example.com"},
    ]
    gw.write("gateways", gateway("one", listeners))
    rule = to("coffee")
    wild = route("wild", "one", [], [rule])
    wild["spec"]["parentRefs"] = [{"name": "one", "sectionName": "wild"}]
    gw.write("routes", wild)
    gw.start()
    address = POOL[0]
    assert served(address, port, "a.example.com") == "coffee"
    assert served(address, port, "a.b.example.com") == "coffee"
    assert served(address, port, "tea.example.com") == "404"
    assert served(address, port, "example.com") == "404"


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_https_listener_serves_its_certificate(gw: Ferryman) -> None:
    port = free_port()
    listener = {
        "name": "https",
        "port": port,
        "protocol": "HTTPS",
        "hostname": "secure.example.com",
        "tls": {"certificateRefs": [{"name": "secure"}]},
    }
    gw.write("secret", tls_secret("secure", ["secure.example.com"]))
    gw.write("gateways", gateway("one", [listener]))
    gw.write("routes", route("r1", "one", [], [to("tea")]))
    gw.start()
    address = POOL[0]
    assert served(address, port, "secure.example.com", https=True) == "tea"
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection((address, port)) as raw,
        ctx.wrap_socket(raw, server_hostname="secure.example.com") as tls,
    ):
        cert = tls.getpeercert(binary_form=True)
    assert cert is not None and b"secure.example.com" in cert
    # HTTP/2 is offered: a client that speaks only h2 (as the conformance
    # suite's does) gets it.
    ctx.set_alpn_protocols(["h2"])
    with (
        socket.create_connection((address, port)) as raw,
        ctx.wrap_socket(raw, server_hostname="secure.example.com") as tls,
    ):
        assert tls.selected_alpn_protocol() == "h2"
    # No listener for that name: no handshake.
    with pytest.raises(httpx.ConnectError):
        get_at(address, port, "other.example.com", https=True)


def test_a_hostname_claimed_by_an_ingress_and_a_gateway(gw: Ferryman) -> None:
    """Each API serves the name where it listens: the Ingress on ferryman's
    ports, the Gateway on its own address."""
    port = free_port()
    gw.write("gateways", gateway("one", [{"name": "http", "port": port, "protocol": "HTTP"}]))
    gw.write("routes", route("r1", "one", ["shared.example.com"], [to("tea")]))
    gw.write(
        "ingress",
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": {"name": "shared", "namespace": "default"},
            "spec": {
                "ingressClassName": "ferryman",
                "rules": [
                    {
                        "host": "shared.example.com",
                        "http": {
                            "paths": [
                                {
                                    "path": "/",
                                    "pathType": "Prefix",
                                    "backend": {
                                        "service": {"name": "coffee", "port": {"number": 80}}
                                    },
                                }
                            ]
                        },
                    }
                ],
            },
        },
    )
    gw.start()
    assert gw.get("shared.example.com", "/").served_by == "coffee"
    assert served(POOL[0], port, "shared.example.com") == "tea"


def test_without_a_pool_gateways_listen_everywhere_but_on_ferrymans_ports(
    ferryman: Ferryman, backends: Backends
) -> None:
    ferryman.write("tea", service_with_backends("tea", [backends.start("tea")]))
    ferryman.write("class", gateway_class())
    port = free_port()
    listeners = [
        {"name": "http", "port": port, "protocol": "HTTP"},
        {"name": "taken", "port": ferryman.http_port, "protocol": "HTTP", "hostname": "x.test"},
    ]
    ferryman.write("gateways", gateway("one", listeners))
    ferryman.write("routes", route("r1", "one", [], [to("tea")]))
    ferryman.extra_args += ["--enable-gateway-api", "--log-format", "json"]
    ferryman.start()
    assert served("127.0.0.1", port, "any.example.com") == "tea"
    assert served("127.0.0.2", port, "any.example.com") == "tea"
    # ferryman's own HTTP port stays the Ingress listener's.
    assert ferryman.get("x.test", "/").status == 404
    assert f"port {ferryman.http_port} is ferryman's Ingress HTTP port" in ferryman.logs()


def test_request_mirror_copies_requests(ferryman: Ferryman, backends: Backends) -> None:
    """RequestMirror: the client gets the route's backend's answer, and each
    request reaches the mirror's backend as well (percent 0 never does)."""
    tea, mirror, never = backends.start("tea"), backends.start("mirror"), backends.start("never")
    for name, b in (("tea", tea), ("mirror", mirror), ("never", never)):
        ferryman.write(name, service_with_backends(name, [b]))
    ferryman.write("class", gateway_class())
    port = free_port()
    ferryman.write("gateways", gateway("one", [{"name": "http", "port": port, "protocol": "HTTP"}]))
    rule = to("tea")
    rule["filters"] = [
        {"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "mirror", "port": 80}}},
        {
            "type": "RequestMirror",
            "requestMirror": {"backendRef": {"name": "never", "port": 80}, "percent": 0},
        },
    ]
    ferryman.write("routes", route("r1", "one", ["m.example.com"], [rule]))
    ferryman.extra_args += ["--enable-gateway-api", "--gateway-addresses", POOL[0]]
    ferryman.start()
    for _ in range(5):
        assert served(POOL[0], port, "m.example.com", "/copy?x=1") == "tea"
    eventually(lambda: mirror.hits >= 5, what="mirrored requests")
    assert tea.hits == 5
    assert never.hits == 0


def test_rule_timeouts_and_backend_filters(gw: Ferryman) -> None:
    """timeouts.request: an answer later than it is a 504 ("0s": none);
    a backendRef's RequestHeaderModifier applies to the requests that backend
    gets, after the rule's own, and its ResponseHeaderModifier to its answers."""
    port = free_port()
    gw.write("gateways", gateway("one", [{"name": "http", "port": port, "protocol": "HTTP"}]))
    slow = to("tea", "/slow")
    slow["timeouts"] = {"request": "500ms"}
    patient = to("tea", "/patient")
    patient["timeouts"] = {"request": "0s"}
    split = {
        "matches": [{"path": {"type": "PathPrefix", "value": "/split"}}],
        "filters": [
            {
                "type": "RequestHeaderModifier",
                "requestHeaderModifier": {"set": [{"name": "x-rule", "value": "r"}]},
            }
        ],
        "backendRefs": [
            {
                "name": "coffee",
                "port": 80,
                "filters": [
                    {
                        "type": "RequestHeaderModifier",
                        "requestHeaderModifier": {
                            "set": [{"name": "x-rule", "value": "coffee"}],
                            "add": [{"name": "x-backend", "value": "coffee"}],
                        },
                    },
                    {
                        "type": "ResponseHeaderModifier",
                        "responseHeaderModifier": {"set": [{"name": "x-answer", "value": "c"}]},
                    },
                ],
            },
        ],
    }
    gw.write("routes", route("r1", "one", ["t.example.com"], [slow, patient, split]))
    gw.start()
    address = POOL[0]
    assert served(address, port, "t.example.com", "/slow") == "tea"
    assert served(address, port, "t.example.com", "/slow?delay=1.5") == "504"
    assert served(address, port, "t.example.com", "/patient?delay=1.5") == "tea"
    r = get_at(address, port, "t.example.com", "/split")
    assert r.served_by == "coffee"
    headers = r.json()["headers"]
    assert (headers["x-rule"], headers["x-backend"]) == ("coffee", "coffee")
    assert r.headers["x-answer"] == "c"


def test_https_misdirected_requests_are_421(gw: Ferryman) -> None:
    """Over HTTPS, a Host that another listener serves than the one the SNI
    name chose is answered 421; a name no listener has stays the SNI's."""
    port = free_port()
    gw.write("secret", tls_secret("cert", ["a.example.com", "b.example.com", "c.example.com"]))
    tls = {"certificateRefs": [{"name": "cert"}]}
    listeners = [
        {"name": "any", "port": port, "protocol": "HTTPS", "tls": tls},
        {"name": "b", "port": port, "protocol": "HTTPS", "hostname": "b.example.com", "tls": tls},
    ]
    gw.write("gateways", gateway("one", listeners))
    gw.write("routes", route("r1", "one", [], [to("tea")]))
    gw.start()
    address = POOL[0]

    def status(sni: str, host: str) -> int:
        with httpx.Client(verify=_insecure_context(), timeout=10) as c:
            req = c.build_request(
                "GET",
                f"https://{address}:{port}/",
                headers={"Host": host},
                extensions={"sni_hostname": sni},
            )
            return c.send(req).status_code

    assert status("a.example.com", "a.example.com") == 200
    assert status("b.example.com", "b.example.com") == 200
    assert status("a.example.com", "b.example.com") == 421
    assert status("b.example.com", "a.example.com") == 421
    assert status("c.example.com", "a.example.com") == 200
