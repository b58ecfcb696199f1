"""HTTP/1.1 and h2c (HTTP/2 with prior knowledge) on one plaintext Gateway
socket of Debian's NGINX 1.22, told apart by ngx_http_ferryman_module
(``ferryman_h2c_detect``, ngx_http_ferryman_h2c.c) instead of the stream
block's hop: the Gateway server listens on the socket itself, so there is no
second connection and no PROXY protocol, and the backend sees the client's
own address either way. Then the detection on its own, in a bare NGINX with a
short client_header_timeout: a connection that sends part of HTTP/2's
preface and stalls is closed at that timeout while others are served, one
whose bytes leave the preface is HTTP/1's (``PRI * HTTP/1.1``: NGINX's 400),
and the preface in pieces is HTTP/2's.

Run it with the module built from this checkout
($FERRYMAN_TEST_NGINX_MODULES_DIR, testkit/harness.py): a module built before
the directive keeps the hop, and these tests fail."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest

from ferryman.dataplane.main_file import FAST_MODULE
from testkit.gateway_docs import gateway, gateway_class, route, to
from testkit.grpc_greeter import SERVICE, Greeter, call_h2c
from testkit.harness import (
    DEBIAN_MODULES,
    MODULES_DIR_ENV,
    Backends,
    Ferryman,
    eventually,
    free_port,
    service_with_backends,
)

ADDRESS = "127.0.0.32"
# The client's own source address, as the backend should see it.
CLIENT = "127.0.0.77"
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def _echo(port: int, request: bytes) -> tuple[int, dict[str, str]]:
    """``request`` sent from CLIENT to the Gateway socket: the status and the
    echo backend's JSON (its request headers)."""
    with socket.create_connection((ADDRESS, port), timeout=10, source_address=(CLIENT, 0)) as s:
        s.sendall(request)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    return status, json.loads(body)["headers"] if status == 200 else {}


@pytest.fixture
def greeter() -> Iterator[Greeter]:
    g = Greeter("one")
    yield g
    g.close()


def test_one_socket_serves_http_1_1_and_h2c_without_the_hop(
    ferryman: Ferryman, greeter: Greeter, backends: Backends
) -> None:
    port = free_port()
    ferryman.write("svc", service_with_backends("one", [greeter], port=50051))  # type: ignore[list-item]
    ferryman.write("svc-tea", service_with_backends("tea", [backends.start("tea")]))
    ferryman.write("class", gateway_class())
    ferryman.write("gateways", gateway("gw", [{"name": "http", "port": port, "protocol": "HTTP"}]))
    grpc_route = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "GRPCRoute",
        "metadata": {"name": "hello", "namespace": "default"},
        "spec": {
            "parentRefs": [{"name": "gw"}],
            "hostnames": ["grpc.example.com"],
            "rules": [{"backendRefs": [{"name": "one", "port": 50051}]}],
        },
    }
    ferryman.write("routes", grpc_route, route("tea", "gw", ["cafe.example.com"], [to("tea")]))
    ferryman.extra_args += ["--enable-gateway-api", "--gateway-addresses", ADDRESS]
    ferryman.start()

    conf = (ferryman.state / "nginx.conf").read_text()
    assert "ferryman_h2c_detect;" in conf
    assert "gateway-h2c.sock" not in conf and "$ferryman_gateway_hop" not in conf
    assert "ngx_stream_ferryman_h2c_module" not in conf
    stream = ferryman.state / "gateway-stream.conf"
    assert not stream.exists() or "ferryman_h2c_preread" not in stream.read_text()
    assert f"listen {ADDRESS}:{port};" in (ferryman.state / "gateway-listens.conf").read_text()

    # HTTP/1.1, then HTTP/2 with prior knowledge, from the same client address.
    request = b"GET / HTTP/1.1\r\nHost: cafe.example.com\r\nConnection: close\r\n\r\n"
    status, headers = eventually(lambda: _echo(port, request), what="HTTP/1.1")
    assert status == 200
    assert headers["x-real-ip"] == CLIENT and headers["x-forwarded-for"] == CLIENT
    assert headers["x-forwarded-port"] == str(port)
    transport = httpx.HTTPTransport(http1=False, http2=True, local_address=CLIENT)
    with httpx.Client(transport=transport, timeout=10) as client:
        r = client.get(f"http://{ADDRESS}:{port}/", headers={"Host": "cafe.example.com"})
    assert r.http_version == "HTTP/2" and r.status_code == 200
    h2 = r.json()["headers"]
    assert h2["x-real-ip"] == CLIENT and h2["x-forwarded-for"] == CLIENT
    assert call_h2c(ADDRESS, port, "grpc.example.com", f"/{SERVICE}/SayHello") == (
        grpc.StatusCode.OK,
        "one",
    )
    # Its bytes leave the preface at the tenth: HTTP/1's, NGINX's 400.
    status, _ = _echo(port, b"PRI * HTTP/1.1\r\n\r\n")
    assert status == 400


def _modules() -> Path:
    return Path(os.environ.get(MODULES_DIR_ENV) or DEBIAN_MODULES)


@pytest.fixture
def detecting(tmp_path: Path) -> Iterator[int]:
    """A bare NGINX with ferryman's module: one socket with the detection and
    a 1 s client_header_timeout, answering its protocol. Its port."""
    port = free_port()
    (tmp_path / "body").mkdir()
    conf = tmp_path / "nginx.conf"
    conf.write_text(f"""
load_module {_modules() / FAST_MODULE};
pid {tmp_path}/nginx.pid;
error_log {tmp_path}/error.log info;
worker_processes 1;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {tmp_path}/body;
    server {{
        listen 127.0.0.1:{port};
        client_header_timeout 1s;
        ferryman_h2c_detect;
        location / {{ return 200 "$server_protocol"; }}
    }}
}}
""")
    proc = subprocess.Popen(
        ["nginx", "-p", str(tmp_path), "-c", str(conf), "-g", "daemon off;"],
        stderr=subprocess.DEVNULL,
    )
    try:
        eventually(lambda: _ask(port, b"GET / HTTP/1.0\r\n\r\n"), what="nginx")
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


def _ask(port: int, *parts: bytes) -> bytes:
    """``parts`` sent apart (a pause between them): the first bytes answered."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        for part in parts:
            s.sendall(part)
            time.sleep(0.1)
        return s.recv(64)


def test_a_stalled_preface_times_out_without_holding_others(detecting: int) -> None:
    port = detecting
    stalled = socket.create_connection(("127.0.0.1", port), timeout=5)
    stalled.sendall(PREFACE[:16])
    started = time.monotonic()
    # Others go on meanwhile, HTTP/1 byte by byte too.
    get = b"GET / HTTP/1.0\r\n\r\n"
    assert b"200 OK" in _ask(port, get)
    assert b"200 OK" in _ask(port, b"G", get[1:])
    # The preface in pieces is HTTP/2's: the server's SETTINGS frame (type 4).
    assert _ask(port, PREFACE[:5], PREFACE[5:20], PREFACE[20:])[3] == 4
    assert b"400 Bad Request" in _ask(port, b"PRI * HTTP/1.1\r\n\r\n")
    # Closed: a reset, since the peeked bytes were never read.
    with contextlib.suppress(ConnectionResetError):
        assert stalled.recv(64) == b""
    assert 0.8 < time.monotonic() - started < 4
