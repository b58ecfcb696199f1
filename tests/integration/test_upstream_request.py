"""What a backend receives: the client's request, unchanged, plus forwarding headers."""

from __future__ import annotations

from tests.integration.harness import (
    Backends,
    Ferryman,
    ingress,
    path,
    rule,
    service_with_backends,
)

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
