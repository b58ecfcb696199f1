"""NIC's proxy buffer annotations and VirtualServer upstream fields through
real NGINX (configs/buffer_tiers.py):
a backend answering with ~12 KB of response headers overflows NGINX's default
4k ``proxy_buffer_size`` ("upstream sent too big header": 502); the route's
buffer tier takes it (200), without a reload, and the ConfigMap's keys stay
the default that an annotation overrides per route."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from testkit.configmap_docs import NAME, NS, configmap
from testkit.harness import (
    Ferryman,
    eventually,
    ingress,
    path,
    rule,
    service_with_backends,
)
from testkit.upstream_fields import one_route

HOST = "buffers.test"
HEADER_BYTES = 12 * 1024  # above 8k, within 16k (with the status line and the rest)


class _BigHeaders(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        for i in range(HEADER_BYTES // 1024):
            self.send_header(f"X-Big-{i}", "h" * 1000)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # NGINX closes the connection on a header too big: expected


class _Backend:
    """service_with_backends reads .name and .port."""

    def __init__(self, port: int) -> None:
        self.name, self.port = "big-headers", port


@pytest.fixture
def big_headers() -> Iterator[_Backend]:
    server = _Server(("127.0.0.1", 0), _BigHeaders)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield _Backend(int(server.server_address[1]))
    server.shutdown()


def _ingress(annotations: dict[str, str], host: str = HOST, name: str = "buf") -> dict[str, Any]:
    return ingress(name, [rule(host, path("/", "app"))], annotations=annotations)


def _status(f: Ferryman, host: str = HOST) -> int:
    return f.get(host, "/").status


def test_proxy_buffer_size_takes_a_large_header_without_reload(
    ferryman: Ferryman, big_headers: _Backend
) -> None:
    ferryman.write("svc", service_with_backends("app", [big_headers]))  # type: ignore[list-item]
    ferryman.write("ing", _ingress({}))
    ferryman.start()
    assert _status(ferryman) == 502  # NGINX's "upstream sent too big header"
    ferryman.write("ing", _ingress({"nginx.org/proxy-buffer-size": "16k"}))
    eventually(lambda: _status(ferryman) == 200, 60, "tier 16k")
    # A tier too small for the header: 8k is 8k, not more.
    ferryman.write("ing", _ingress({"nginx.org/proxy-buffer-size": "8k"}))
    eventually(lambda: _status(ferryman) == 502, 60, "tier 8k")
    # proxy-buffers' one buffer size alone asks for the tier too.
    ferryman.write("ing", _ingress({"nginx.org/proxy-buffers": "4 16k"}))
    eventually(lambda: _status(ferryman) == 200, 60, "buffers 4 16k")
    # Unbuffered (@ferryman_unbuffered_b16): the header still fits.
    unbuffered = {"nginx.org/proxy-buffering": "false", "nginx.org/proxy-buffer-size": "16k"}
    ferryman.write("ing", _ingress(unbuffered))
    eventually(lambda: _status(ferryman) == 200, 60, "unbuffered tier 16k")
    ferryman.write("ing", _ingress({"nginx.org/proxy-buffering": "false"}))
    eventually(lambda: _status(ferryman) == 502, 60, "unbuffered 4k")
    assert ferryman.reloads() == 1  # the start-up reload only


def test_above_the_largest_tier_warns_and_keeps_the_server_buffers(
    ferryman: Ferryman, big_headers: _Backend
) -> None:
    ferryman.write("svc", service_with_backends("app", [big_headers]))  # type: ignore[list-item]
    ferryman.write("ing", _ingress({"nginx.org/proxy-buffer-size": "512k"}))
    ferryman.start()
    event = eventually(lambda: ferryman.events_for("buf")[-1:], 60, "event")[0]
    assert event["reason"] == "AddedOrUpdatedWithWarning"
    assert "nginx.org/proxy-buffer-size" in event["message"]
    assert "largest buffer tier (proxy_buffer_size 256k" in event["message"]
    assert _status(ferryman) == 502  # the server's 4k


def test_configmap_buffers_are_the_default_and_the_annotation_overrides(
    ferryman: Ferryman, big_headers: _Backend
) -> None:
    ferryman.extra_args += ["--nginx-configmaps", f"{NS}/{NAME}"]
    ferryman.write("cm", configmap(proxy_buffer_size="16k", proxy_buffers="8 16k"))
    ferryman.write("svc", service_with_backends("app", [big_headers]))  # type: ignore[list-item]
    ferryman.write("plain", _ingress({}, "plain.test", "plain"))
    ferryman.write("ing", _ingress({"nginx.org/proxy-read-timeout": "30s"}))
    ferryman.start()
    assert _status(ferryman, "plain.test") == 200  # the ConfigMap's 16k, fast path
    assert _status(ferryman) == 200  # the ConfigMap's 16k, slow path
    ferryman.write("ing", _ingress({"nginx.org/proxy-buffer-size": "4k"}))
    eventually(lambda: _status(ferryman) == 502, 60, "the annotation's 4k")
    assert _status(ferryman, "plain.test") == 200
    assert ferryman.reloads() == 1


def test_virtualserver_upstream_buffers_take_a_large_header_without_reload(
    ferryman: Ferryman, big_headers: _Backend
) -> None:
    ferryman.write("svc", service_with_backends("app", [big_headers]))  # type: ignore[list-item]
    ferryman.write("vs", one_route("v", HOST, {}))
    ferryman.start()
    assert _status(ferryman) == 502
    ferryman.write("vs", one_route("v", HOST, {"buffer-size": "16k"}))
    eventually(lambda: _status(ferryman) == 200, 60, "buffer-size 16k")
    ferryman.write("vs", one_route("v", HOST, {"buffers": {"number": 4, "size": "8k"}}))
    eventually(lambda: _status(ferryman) == 502, 60, "buffers 4 8k: tier 8k")
    ferryman.write("vs", one_route("v", HOST, {"buffering": False, "buffer-size": "32k"}))
    eventually(lambda: _status(ferryman) == 200, 60, "unbuffered, buffer-size 32k")
    assert "Warning" not in ferryman.events_for("v")[-1]["reason"]
    ferryman.write("vs", one_route("v", HOST, {"buffer-size": "1m"}))
    eventually(lambda: _status(ferryman) == 502, 60, "above the largest tier")
    event = ferryman.last_event("v", "AddedOrUpdatedWithWarning")
    assert "spec.upstreams[0].buffer-size: above ferryman's largest buffer tier" in event["message"]
    assert ferryman.reloads() == 1
