"""NIC's grpc-upstreams example (custom-resources/grpc-upstreams), applied
unchanged with its ConfigMap (http2: "true"): the README's SayHello over TLS
and HTTP/2 is answered by the greeter, through ``@ferryman_grpc``
(kinds/virtualserver/records/grpc.py), with no reload."""

from __future__ import annotations

import base64
from typing import Any

import grpc

from testkit.grpc_greeter import Greeter, say_hello, status_of
from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    service_with_backends,
    tls_secret,
)
from testkit.nic_fixtures import NIC_EXAMPLES

HOST = "greeter.example.com"
FOLDER = NIC_EXAMPLES / "grpc-upstreams"


def _example(f: Ferryman, *, with_virtual_server: bool = True) -> bytes:
    """The example's ConfigMap, Secret and VirtualServer; the certificate."""
    f.extra_args += ["--nginx-configmaps", "nginx-ingress/nginx-config"]
    secret = tls_secret("tls-secret", [HOST])  # make secrets
    f.write("tls", secret)
    f.write_text("grpc-upstreams-nginx-config.yaml", (FOLDER / "nginx-config.yaml").read_text())
    if with_virtual_server:
        virtual_server = (FOLDER / "greeter-virtual-server.yaml").read_text()
        f.write_text("grpc-upstreams-greeter.yaml", virtual_server)
    return base64.b64decode(secret["data"]["tls.crt"])


def test_grpc_upstreams(ferryman: Ferryman, backends: Backends) -> None:
    """README: grpcurl's SayHello is answered ("Hello"); the VirtualServer comes
    after the start, and serving it reloads nothing."""
    f = ferryman
    greeter = Greeter("greeter")
    try:
        f.write("grpc", service_with_backends("grpc-svc", [greeter], port=50051))  # type: ignore[list-item]
        virtual_server = FOLDER / "greeter-virtual-server.yaml"
        root = _example(f, with_virtual_server=False)
        f.start()
        f.write_text("grpc-upstreams-greeter.yaml", virtual_server.read_text())
        answer = eventually(lambda: _answer(f, root), 60, "SayHello answered")
        assert (answer["name"], answer["message"]) == ("greeter", "Hello ferryman")
        # The slow path's headers, as grpc_set_header sends them.
        metadata = answer["metadata"]
        assert metadata["x-forwarded-proto"] == "https"
        assert metadata["x-forwarded-host"] == HOST
        assert metadata["x-real-ip"] == "127.0.0.1"
        e = f.last_event("cafe", "AddedOrUpdated", kind="VirtualServer")
        assert e["type"] == "Normal"
        assert f.reloads() == 1
    finally:
        greeter.close()


def _answer(f: Ferryman, root: bytes) -> dict[str, Any] | None:
    try:
        return say_hello(f.https_port, HOST, root)
    except grpc.RpcError:
        return None


def test_a_greeter_that_is_down_is_unavailable(ferryman: Ferryman, backends: Backends) -> None:
    """NGINX's 502 (the peer refuses the connection) reaches a gRPC client as
    status 14 UNAVAILABLE, "unavailable", as NIC's gRPC error locations answer
    it (an HTTP 502 would read as UNAVAILABLE with another message)."""
    f = ferryman
    greeter = Greeter("greeter")
    greeter.close()  # its port now refuses connections
    f.write("grpc", service_with_backends("grpc-svc", [greeter], port=50051))  # type: ignore[list-item]
    root = _example(f)
    f.start()
    assert status_of(f.https_port, HOST, root) == (grpc.StatusCode.UNAVAILABLE, "unavailable")
