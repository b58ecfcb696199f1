"""A VirtualServer's upstream fields and proxy header fields that NIC writes as
NGINX directives, done per request with no reload (kinds/virtualserver/records/upstream.py,
vs_response.py, dataplane/lua/ferryman_vs_upstream.lua): real NGINX, real
backends, what the client and the backend see."""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from testkit.cluster_ip import assert_use_cluster_ip
from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    service_with_backends,
)
from testkit.upstream_fields import _TLSEcho, one_route
from testkit.virtualservers import vs


def start(f: Ferryman, backends: list[Any], *docs: dict[str, Any]) -> None:
    f.write("svc", service_with_backends("app", backends))
    for i, d in enumerate(docs):
        f.write(f"doc{i}", d)
    f.start()


def test_client_max_body_size_answers_413(ferryman: Ferryman, backends: Backends) -> None:
    start(ferryman, [backends.start("a")], one_route("b", "b.test", {"client-max-body-size": "1k"}))
    post = ferryman.get
    assert post("b.test", "/", method="POST", content=b"x" * 1024).status == 200
    assert post("b.test", "/", method="POST", content=b"x" * 1025).status == 413
    # A chunked body (no Content-Length) is measured once read.
    chunks = iter([b"x" * 800, b"x" * 800])
    r = httpx.post(
        f"http://127.0.0.1:{ferryman.http_port}/",
        headers={"Host": "b.test"},
        content=chunks,
        timeout=10,
    )
    assert r.status_code == 413
    assert ferryman.events_for("b")[-1]["reason"] == "AddedOrUpdated"


def test_tls_enable_proxies_over_https(ferryman: Ferryman) -> None:
    backend = _TLSEcho("secure")
    try:
        start(ferryman, [backend], one_route("t", "t.test", {"tls": {"enable": True}}))
        r = ferryman.get("t.test", "/x")
        assert r.status == 200 and r.served_by == "secure"
        assert r.json()["path"] == "/x"
        # Without tls.enable the same backend gets plain HTTP: NGINX's 502.
        ferryman.write("doc0", one_route("t", "t.test", {}))
        eventually(lambda: ferryman.get("t.test", "/x").status == 502, what="plain http")
        assert ferryman.reloads() == 1
    finally:
        backend.close()


def test_keepalive_zero_closes_each_upstream_connection(
    ferryman: Ferryman, backends: Backends
) -> None:
    closing, kept = backends.start("closing"), backends.start("kept")
    ferryman.write("svc-c", service_with_backends("c", [closing]))
    ferryman.write("svc-k", service_with_backends("k", [kept]))
    upstreams = [
        {"name": "c", "service": "c", "port": 80, "keepalive": 0},
        {"name": "k", "service": "k", "port": 80, "keepalive": 32},
    ]
    routes = [{"path": "/c", "action": {"pass": "c"}}, {"path": "/k", "action": {"pass": "k"}}]
    ferryman.write("vs", vs("ka", "ka.test", routes, upstreams))
    ferryman.start()
    for _ in range(10):
        assert ferryman.get("ka.test", "/c").json()["headers"]["connection"] == "close"
        assert "connection" not in ferryman.get("ka.test", "/k").json()["headers"]
    # NIC: Connection: close without keepalive; a pool to reuse with it.
    assert closing.connections == 10
    assert kept.connections < 10
    assert ferryman.events_for("ka")[-1]["reason"] == "AddedOrUpdated"


def test_max_conns_limits_requests_in_flight(ferryman: Ferryman, backends: Backends) -> None:
    b = backends.start("a")
    start(ferryman, [b], one_route("m", "m.test", {"max-conns": 1}))
    held: list[int] = []
    t = threading.Thread(target=lambda: held.append(ferryman.get("m.test", "/?hold").status))
    t.start()
    eventually(lambda: b.holding == 1, what="the first request held")
    # The one peer has max-conns requests in flight: no live upstream, NGINX's 502.
    assert ferryman.get("m.test", "/second").status == 502
    b.release()
    t.join()
    assert held == [200]
    assert ferryman.get("m.test", "/third").status == 200


def test_response_headers_pass_and_ignore(ferryman: Ferryman, backends: Backends) -> None:
    b = backends.start("a")
    ferryman.write("svc", service_with_backends("app", [b]))
    passing = {
        "proxy": {
            "upstream": "up",
            "responseHeaders": {"pass": ["Server"], "ignore": ["Expires", "Set-Cookie"]},
        }
    }
    routes = [{"path": "/pass", "action": passing}, {"path": "/", "action": {"pass": "up"}}]
    upstreams = [{"name": "up", "service": "app", "port": 80}]
    ferryman.write("vs", vs("p", "p.test", routes, upstreams))
    ferryman.start()
    # The echo backend is Python's http.server: its Server header reaches the
    # client only where the route passes it (NGINX hides it by default).
    assert ferryman.get("p.test", "/pass").headers["server"].startswith("BaseHTTP")
    assert ferryman.get("p.test", "/").headers.get("server") == "nginx"
    assert ferryman.events_for("p")[-1]["reason"] == "AddedOrUpdated"


class _RateLimited(BaseHTTPRequestHandler):
    """Answers 4,000 bytes with X-Accel-Limit-Rate: 1000 (bytes per second)."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("X-Accel-Limit-Rate", "1000")
        self.send_header("Content-Length", "4000")
        self.end_headers()
        self.wfile.write(b"x" * 4000)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_ignored_x_accel_limit_rate_is_undone(ferryman: Ferryman) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _RateLimited)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    backend = _Named("limited", int(server.server_address[1]))
    ignoring = {"proxy": {"upstream": "up", "responseHeaders": {"ignore": ["X-Accel-Limit-Rate"]}}}
    routes = [{"path": "/ignored", "action": ignoring}, {"path": "/", "action": {"pass": "up"}}]
    upstreams = [{"name": "up", "service": "app", "port": 80}]
    try:
        start(ferryman, [backend], vs("r", "r.test", routes, upstreams))

        def took(p: str) -> float:
            started = time.monotonic()
            assert len(ferryman.get("r.test", p).text) == 4000
            return time.monotonic() - started

        assert took("/limited") > 1.5  # NGINX obeys the backend's rate: ~3 s
        assert took("/ignored") < 1.0
    finally:
        server.shutdown()
        server.server_close()


class _Named:
    def __init__(self, name: str, port: int) -> None:
        self.name, self.port = name, port


def test_request_headers_set_replaces_ferrymans_own(
    either_fast_path: Ferryman, backends: Backends
) -> None:
    # The headers' defaults come from the module's variables or from maps.
    ferryman = either_fast_path
    action = {
        "proxy": {
            "upstream": "up",
            "requestHeaders": {
                "set": [
                    {"name": "Host", "value": "inner.example"},
                    {"name": "X-Real-IP", "value": "192.0.2.1"},
                    {"name": "X-Forwarded-Proto", "value": "${scheme}-x"},
                    {"name": "X-Forwarded-For", "value": ""},
                ]
            },
        }
    }
    start(ferryman, [backends.start("a")], one_route("h", "h.test", {}, action))
    headers = ferryman.get("h.test", "/").json()["headers"]
    assert headers["host"] == "inner.example"
    assert headers["x-real-ip"] == "192.0.2.1"
    assert headers["x-forwarded-proto"] == "http-x"
    assert "x-forwarded-for" not in headers  # empty: not sent, as proxy_set_header
    assert headers["x-forwarded-host"] == "h.test"  # the others as ferryman sets them
    assert ferryman.events_for("h")[-1]["reason"] == "AddedOrUpdated"


class _SlowFailure:
    """Accepts a connection and closes it half a second later, unanswered: each
    attempt fails (NGINX's "error") after 0.5 s."""

    def __init__(self, name: str) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.name, self.port, self.accepted = name, int(self.sock.getsockname()[1]), 0
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Timer(0.5, conn.close).start()

    def close(self) -> None:
        self.sock.close()


def test_next_upstream_timeout_stops_the_retries(ferryman: Ferryman) -> None:
    failing = [_SlowFailure(f"s{i}") for i in range(4)]
    ferryman.write("svc", service_with_backends("app", failing))
    common = {"service": "app", "port": 80, "max-fails": 0}
    upstreams = [
        {"name": "bounded", **common, "next-upstream-timeout": "900ms"},
        {"name": "free", **common},
    ]
    routes = [
        {"path": "/bounded", "action": {"pass": "bounded"}},
        {"path": "/free", "action": {"pass": "free"}},
    ]
    ferryman.write("vs", vs("n", "n.test", routes, upstreams))
    ferryman.start()

    def attempts(p: str) -> tuple[int, int, float]:
        before = sum(b.accepted for b in failing)
        started = time.monotonic()
        status = ferryman.get("n.test", p).status
        return status, sum(b.accepted for b in failing) - before, time.monotonic() - started

    try:
        assert attempts("/free")[:2] == (502, 4)  # every peer fails in turn
        status, tried, took = attempts("/bounded")
        # 0.5 s an attempt: a third would start after the 0.9 s.
        assert (status, tried) == (502, 2), (status, tried, took)
        assert took < 1.4
    finally:
        for b in failing:
            b.close()


def test_unsupported_fields_warn_and_no_field_reloads(
    ferryman: Ferryman, backends: Backends
) -> None:
    b = backends.start("a")
    fields = {
        "next-upstream": "error timeout http_502",
        "client-body-buffer-size": "8k",
        "subselector": {"version": "v1"},
    }
    start(ferryman, [b], one_route("w", "w.test", fields))
    assert ferryman.get("w.test", "/").served_by == "a"
    message = ferryman.events_for("w")[-1]["message"]
    assert "spec.upstreams[0].next-upstream: proxy_next_upstream takes no variable" in message
    assert "spec.upstreams[0].client-body-buffer-size: client_body_buffer_size takes no" in message
    assert "spec.upstreams[0].subselector: not implemented" in message
    # Each per-request field, changed in turn: no reload.
    for upstream in (
        {"client-max-body-size": "2k"},
        {"max-conns": 5, "keepalive": 0},
        {"tls": {"enable": False}, "next-upstream-timeout": "2s"},
    ):
        ferryman.write("doc0", one_route("w", "w.test", upstream))
        eventually(
            lambda: ferryman.events_for("w")[-1]["reason"] == "AddedOrUpdated", what="applied"
        )
        assert ferryman.get("w.test", "/").served_by == "a"
    assert ferryman.reloads() == 1


def test_use_cluster_ip_proxies_to_the_cluster_ip(
    either_fast_path: Ferryman, backends: Backends
) -> None:
    """NIC's upstream ``use-cluster-ip``, as the Ingress annotation: the Service's
    ClusterIP and port instead of its endpoints (kube-proxy balances); turning it
    on or off and a new ClusterIP are endpoint-set changes, no reload."""

    def upstream(name: str, host: str, port: int, on: bool) -> dict[str, Any]:
        return one_route(name, host, {"port": port, **({"use-cluster-ip": True} if on else {})})

    assert_use_cluster_ip(either_fast_path, backends, upstream)
