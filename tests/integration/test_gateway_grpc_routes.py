"""GRPCRoutes in manifests mode through real NGINX and real grpcio backends: a
Gateway's HTTP listener serves gRPC over HTTP/2 without TLS (h2c, prior
knowledge) beside HTTP/1.1 on the same socket, an HTTPS listener over ALPN h2;
calls go by service and method, headers and weights to the gRPC location
(grpc_pass), a call no route takes is UNIMPLEMENTED, and route changes go
live without a reload. On every server: Debian's NGINX 1.22, which cannot
tell h2c from HTTP/1.1 on one socket, through ferryman's module's detection
(ngx_http_ferryman_h2c.c), or the stream block's hop with a module built
before it (ngx_stream_ferryman_h2c_module, dataplane/main_file.py)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from testkit.gateway_docs import gateway, gateway_class, route, served, to
from testkit.grpc_greeter import SERVICE, Greeter, call_h2c, decode, encode, say_hello
from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    free_port,
    service_with_backends,
    tls_secret,
)

POOL = ("127.0.0.30", "127.0.0.31")
HELLO = f"/{SERVICE}/SayHello"
AGAIN = f"/{SERVICE}/SayHelloAgain"
OK = grpc.StatusCode.OK


def grpc_route(
    name: str, parent: str, hostnames: list[str], rules: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "GRPCRoute",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"parentRefs": [{"name": parent}], "hostnames": hostnames, "rules": rules},
    }


def to_greeter(service: str, method: dict[str, str] | None = None, **match: Any) -> dict[str, Any]:
    rule: dict[str, Any] = {"backendRefs": [{"name": service, "port": 50051}]}
    if method is not None or match:
        rule["matches"] = [{**({"method": method} if method else {}), **match}]
    return rule


def answer_headers(address: str, port: int, authority: str, method: str) -> dict[str, str]:
    """The response headers (initial metadata) of one call over h2c."""
    options = [("grpc.default_authority", authority)]
    with grpc.insecure_channel(f"{address}:{port}", options=options) as channel:
        call = channel.unary_unary(method, request_serializer=encode, response_deserializer=decode)
        _, outcome = call.with_call("ferryman", timeout=10)
        return {str(k): str(v) for k, v in outcome.initial_metadata()}


@pytest.fixture
def greeters() -> Iterator[dict[str, Greeter]]:
    started = {name: Greeter(name) for name in ("one", "two")}
    yield started
    for g in started.values():
        g.close()


@pytest.fixture
def gw(ferryman: Ferryman, greeters: dict[str, Greeter], backends: Backends) -> Ferryman:
    for name, greeter in greeters.items():
        svc = service_with_backends(name, [greeter], port=50051)  # type: ignore[list-item]
        ferryman.write(f"svc-{name}", svc)
    ferryman.write("svc-tea", service_with_backends("tea", [backends.start("tea")]))
    ferryman.write("class", gateway_class())
    ferryman.extra_args += [
        "--enable-gateway-api",
        "--gateway-addresses",
        f"{POOL[0]}-{POOL[-1]}",
    ]
    return ferryman


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_grpc_and_http_1_1_on_one_http_listener(gw: Ferryman) -> None:
    """Method matches (service and method, service alone, a regular
    expression), header matches and the HTTP/1.1 route of another hostname,
    all on one plaintext socket; route changes without reloads."""
    port = free_port()
    gw.write("gateways", gateway("one", [{"name": "http", "port": port, "protocol": "HTTP"}]))
    again = to_greeter("two", {"service": SERVICE, "method": "SayHelloAgain"})
    again["filters"] = [
        {"type": "ResponseHeaderModifier", "responseHeaderModifier": {"set": [
            {"name": "x-route", "value": "again"}]}},
    ]  # fmt: skip
    rules = [
        again,
        to_greeter("two", {"service": SERVICE}, headers=[{"name": "version", "value": "two"}]),
        to_greeter("one", {"service": SERVICE}),
    ]
    gw.write(
        "routes",
        grpc_route("hello", "one", ["grpc.example.com"], rules),
        route("tea", "one", ["cafe.example.com"], [to("tea")]),
    )
    gw.start()
    address = POOL[0]
    # HTTP/1.1 on the same socket.
    assert served(address, port, "cafe.example.com") == "tea"
    assert call_h2c(address, port, "grpc.example.com", HELLO) == (OK, "one")
    assert call_h2c(address, port, "grpc.example.com", AGAIN) == (OK, "two")
    # The rule's ResponseHeaderModifier: on the answer's headers (initial metadata).
    assert answer_headers(address, port, "grpc.example.com", AGAIN).get("x-route") == "again"
    assert "x-route" not in answer_headers(address, port, "grpc.example.com", HELLO)
    version = (("version", "two"),)
    assert call_h2c(address, port, "grpc.example.com", HELLO, metadata=version) == (OK, "two")
    # A service no rule takes, and a hostname no route has: UNIMPLEMENTED (404).
    assert call_h2c(address, port, "grpc.example.com", "/other.Svc/SayHello")[0] == (
        grpc.StatusCode.UNIMPLEMENTED
    )
    assert call_h2c(address, port, "other.example.com", HELLO)[0] == grpc.StatusCode.UNIMPLEMENTED
    reloads = gw.reloads()
    regex = {"type": "RegularExpression", "service": r"helloworld\..*", "method": "Say.*Again"}
    gw.write(
        "routes",
        grpc_route("hello", "one", ["grpc.example.com"], [to_greeter("one", regex)]),
        route("tea", "one", ["cafe.example.com"], [to("tea")]),
    )
    eventually(
        lambda: call_h2c(address, port, "grpc.example.com", AGAIN) == (OK, "one"), what="edit"
    )
    assert call_h2c(address, port, "grpc.example.com", HELLO)[0] == grpc.StatusCode.UNIMPLEMENTED
    gw.write("routes", route("tea", "one", ["cafe.example.com"], [to("tea")]))
    eventually(
        lambda: (
            call_h2c(address, port, "grpc.example.com", AGAIN)[0] == grpc.StatusCode.UNIMPLEMENTED
        ),
        what="delete",
    )
    assert served(address, port, "cafe.example.com") == "tea"
    assert gw.reloads() == reloads


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_weights_and_an_invalid_backend(gw: Ferryman) -> None:
    """Weighted backendRefs out of their sum (weight 0 takes nothing); an
    invalid backend's share is UNAVAILABLE, as the specification asks."""
    port = free_port()
    gw.write("gateways", gateway("one", [{"name": "http", "port": port, "protocol": "HTTP"}]))
    weighted = {
        "backendRefs": [
            {"name": "one", "port": 50051, "weight": 3},
            {"name": "two", "port": 50051, "weight": 1},
            {"name": "tea", "port": 80, "weight": 0},
        ]
    }
    gw.write("routes", grpc_route("w", "one", [], [weighted]))
    gw.start()
    address = POOL[0]
    answers = [call_h2c(address, port, "any.example.com", HELLO) for _ in range(200)]
    counts = {name: answers.count((OK, name)) for name in ("one", "two")}
    assert counts["one"] + counts["two"] == 200
    # 150 expected of 200: far outside chance below 110 or above 185.
    assert 110 < counts["one"] < 185, counts
    missing = {"backendRefs": [{"name": "nowhere", "port": 50051}]}
    gw.write("routes", grpc_route("w", "one", [], [missing]))
    eventually(
        lambda: call_h2c(address, port, "any.example.com", HELLO)[0] == grpc.StatusCode.UNAVAILABLE,
        what="invalid backend",
    )


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_grpc_over_an_https_listener(gw: Ferryman) -> None:
    """An HTTPS listener offers h2 by ALPN on every server: the GRPCRoute's
    calls reach their greeter with the request headers its filter sets, and a
    route change is a push, never a reload."""
    port = free_port()
    secret = tls_secret("secure", ["secure.example.com"])
    gw.write("secret", secret)
    listener = {
        "name": "https",
        "port": port,
        "protocol": "HTTPS",
        "hostname": "secure.example.com",
        "tls": {"certificateRefs": [{"name": "secure"}]},
    }
    gw.write("gateways", gateway("one", [listener]))
    rule = to_greeter("two", {"service": SERVICE, "method": "SayHello"})
    rule["filters"] = [
        {"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [
            {"name": "x-route", "value": "grpc"}]}},
    ]  # fmt: skip
    gw.write("routes", grpc_route("secure", "one", [], [rule]))
    gw.start()
    root = base64.b64decode(secret["data"]["tls.crt"])
    answer = say_hello(port, "secure.example.com", root, address=POOL[0])
    assert answer["name"] == "two"
    assert answer["metadata"]["x-route"] == "grpc"
    reloads = gw.reloads()
    gw.write("routes", grpc_route("secure", "one", [], [to_greeter("one")]))
    eventually(
        lambda: say_hello(port, "secure.example.com", root, address=POOL[0])["name"] == "one",
        what="edit",
    )
    assert gw.reloads() == reloads
