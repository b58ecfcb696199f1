"""What a backend receives: the client's request, unchanged, plus forwarding headers."""

from __future__ import annotations

import json
import socket

import pytest

from testkit.harness import (
    Backends,
    Ferryman,
    ingress,
    path,
    rule,
    service_with_backends,
)

pytestmark = pytest.mark.flavours("nginx", "nginx-1.30", "angie")

HOST = "echo.example.com"


def _start(ferryman: Ferryman, backends: Backends) -> None:
    ferryman.write("svc", service_with_backends("echo", [backends.start("echo")]))
    ferryman.write("ing", ingress("echo", [rule(HOST, path("/", "echo"))]))
    ferryman.start()


def test_request_reaches_backend_unchanged(ferryman: Ferryman, backends: Backends) -> None:
    _start(ferryman, backends)
    body = b'{"order": "flat white", "bytes": "\\u00e9;{}$"}'
    r = ferryman.get(
        HOST,
        "/api/a%20b/c%2Fd?x=1&y=%2F&z=%E2%82%AC",
        method="PUT",
        headers={"X-Custom": "kept", "Content-Type": "application/json", "Cookie": "a=b"},
        content=body,
    )
    assert r.status == 200
    seen = r.json()
    assert seen["method"] == "PUT"
    assert seen["path"] == "/api/a%20b/c%2Fd?x=1&y=%2F&z=%E2%82%AC"
    assert seen["version"] == "HTTP/1.1"
    assert seen["body"] == body.decode("latin-1")
    h = seen["headers"]
    assert h["x-custom"] == "kept"
    assert h["cookie"] == "a=b"
    assert h["content-type"] == "application/json"


def test_methods_pass_through(ferryman: Ferryman, backends: Backends) -> None:
    _start(ferryman, backends)
    for method in ("GET", "POST", "DELETE", "PATCH", "OPTIONS"):
        r = ferryman.get(HOST, "/m", method=method, content=b"x" if method != "GET" else None)
        assert r.status == 200
        assert r.json()["method"] == method


def test_host_and_forwarding_headers(ferryman: Ferryman, backends: Backends) -> None:
    _start(ferryman, backends)
    r = ferryman.get(f"{HOST}:{ferryman.http_port}", "/", headers={"X-Forwarded-For": "10.1.1.1"})
    h = r.json()["headers"]
    assert h["host"] == f"{HOST}:{ferryman.http_port}"  # preserved exactly as sent
    assert h["x-forwarded-for"] == "10.1.1.1, 127.0.0.1"
    assert h["x-real-ip"] == "127.0.0.1"
    assert h["x-forwarded-proto"] == "http"
    assert h["x-forwarded-host"] == HOST


def test_upgrade_and_connection_headers(either_fast_path: Ferryman, backends: Backends) -> None:
    ferryman = either_fast_path
    _start(ferryman, backends)
    plain = ferryman.get(HOST, "/").json()["headers"]
    assert "upgrade" not in plain
    assert "connection" not in plain  # HTTP/1.1 keepalive to the backend
    ws = ferryman.get(HOST, "/ws", headers={"Upgrade": "websocket", "Connection": "Upgrade"})
    h = ws.json()["headers"]
    assert (h["upgrade"], h["connection"]) == ("websocket", "upgrade")


def test_request_without_host_header(either_fast_path: Ferryman, backends: Backends) -> None:
    """HTTP/1.0 without Host reaches host-less rules; the backend still gets a Host."""
    ferryman = either_fast_path
    ferryman.write("svc", service_with_backends("echo", [backends.start("echo")]))
    ferryman.write("ing", ingress("echo", [rule(None, path("/", "echo"))]))
    ferryman.start()
    with socket.create_connection(("127.0.0.1", ferryman.http_port), timeout=10) as s:
        s.sendall(b"GET /plain HTTP/1.0\r\n\r\n")
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    seen = json.loads(body)
    assert seen["path"] == "/plain"
    assert seen["headers"]["host"] == "_"  # $host: the server's name
