"""What clients cannot do through ferryman (docs/operations.md, "Requests and headers"):
raw requests over a socket, on both fast paths (ngx_http_ferryman_module and Lua)."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from testkit.harness import (
    Backends,
    Ferryman,
    ingress,
    path,
    rule,
    service,
    service_with_backends,
    tls_secret,
)


class Connection:
    """One client connection, requests written by hand, answers read one by one."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buffer = b""

    def close(self) -> None:
        self.sock.close()

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed by the server")
        self.buffer += chunk

    def ask(self, target: str, headers: dict[str, str] | None = None) -> Answer:
        head = f"GET {target} HTTP/1.1\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self.sock.sendall(head.encode() + b"\r\n")
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        raw, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        status_line, *lines = raw.decode("latin-1").split("\r\n")
        fields = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
        length = int(fields.get("content-length", "0"))
        while len(self.buffer) < length:
            self._fill()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return Answer(int(status_line.split()[1]), fields, body)


class Answer:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def seen(self) -> dict[str, Any]:
        """What the echo backend received."""
        assert self.status == 200, (self.status, self.body[:200])
        return dict(json.loads(self.body))


def ask(f: Ferryman, target: str, headers: dict[str, str]) -> Answer:
    c = Connection(f.http_port)
    try:
        return c.ask(target, headers)
    finally:
        c.close()


def _two_hosts(f: Ferryman, backends: Backends) -> None:
    f.write("svc-a", service_with_backends("a", [backends.start("a")]))
    f.write("svc-b", service_with_backends("b", [backends.start("b")]))
    f.write("ing-a", ingress("a", [rule("a.test", path("/", "a"))]))
    f.write("ing-b", ingress("b", [rule("b.test", path("/", "b"))]))
    f.start()


def test_absolute_form_target_is_the_host_forwarded(
    either_fast_path: Ferryman, backends: Backends
) -> None:
    """RFC 9112 3.2.2: the request-target's authority wins over Host, for routing
    and for what the backend is told."""
    f = either_fast_path
    _two_hosts(f, backends)
    r = ask(f, "http://b.test/x", {"Host": "a.test"})
    assert r.seen()["name"] == "b"
    assert r.seen()["headers"]["host"] == "b.test"
    assert r.seen()["path"] == "/x"
    r = ask(f, f"http://B.test:{f.http_port}/y?q=1", {"Host": "a.test"})
    assert (r.seen()["name"], r.seen()["headers"]["host"]) == ("b", f"B.test:{f.http_port}")
    assert r.seen()["headers"]["x-forwarded-host"] == "b.test"
    # Origin-form: the Host header as sent, port included.
    r = ask(f, "/z", {"Host": f"a.test:{f.http_port}"})
    assert (r.seen()["name"], r.seen()["headers"]["host"]) == ("a", f"a.test:{f.http_port}")


def test_client_headers_backends_could_trust_are_not_passed(
    either_fast_path: Ferryman, backends: Backends
) -> None:
    f = either_fast_path
    _two_hosts(f, backends)
    sent = {
        "Host": "a.test",
        "Proxy": "http://evil.example:3128",  # httpoxy
        "Forwarded": "for=10.9.9.9;host=admin.internal;proto=https",
        "X-Original-URL": "/admin",
        "X-Rewrite-URL": "/admin",
        "X-Forwarded-Port": "443",
        "X-Custom": "kept",
    }
    h = ask(f, "/", sent).seen()["headers"]
    for name in ("proxy", "forwarded", "x-original-url", "x-rewrite-url"):
        assert name not in h, name
    assert h["x-forwarded-port"] == str(f.http_port)
    assert h["x-custom"] == "kept"


def test_only_websocket_upgrades_are_forwarded(
    either_fast_path: Ferryman, backends: Backends
) -> None:
    f = either_fast_path
    _two_hosts(f, backends)
    h2c = {
        "Host": "a.test",
        "Upgrade": "h2c",
        "Connection": "Upgrade, HTTP2-Settings",
        "HTTP2-Settings": "AAMAAABkAARAAAAAAAIAAAAA",
    }
    h = ask(f, "/", h2c).seen()["headers"]
    assert "upgrade" not in h
    assert "http2-settings" not in h
    assert "connection" not in h
    ws = {"Host": "a.test", "Upgrade": "WebSocket", "Connection": "Upgrade"}
    h = ask(f, "/", ws).seen()["headers"]
    assert (h["upgrade"], h["connection"]) == ("WebSocket", "upgrade")


def test_x_forwarded_for_replaced_when_asked(ferryman: Ferryman, backends: Backends) -> None:
    ferryman.extra_args += ["--compute-full-forwarded-for", "false"]
    _two_hosts(ferryman, backends)
    h = ask(ferryman, "/", {"Host": "a.test", "X-Forwarded-For": "10.1.1.1"}).seen()["headers"]
    assert h["x-forwarded-for"] == "127.0.0.1"


def test_slow_path_answers_keep_the_connection(
    either_fast_path: Ferryman, backends: Backends, tmp_path: Path
) -> None:
    f = either_fast_path
    f.write("svc-a", service_with_backends("a", [backends.start("a")]))
    f.write("svc-gone", service("gone"))  # no endpoints: 503
    f.write("tls", tls_secret("tls", ["secure.test"]))
    f.write(
        "ing",
        ingress(
            "a",
            [
                rule("a.test", path("/app", "a"), path("/gone", "gone")),
                rule("secure.test", path("/", "a")),
            ],
            tls=[{"hosts": ["secure.test"], "secretName": "tls"}],
        ),
    )
    f.start()
    c = Connection(f.http_port)
    try:
        answers = [
            c.ask("/app", {"Host": "unknown.test"}),  # no host
            c.ask("/elsewhere", {"Host": "a.test"}),  # no route
            c.ask("/gone", {"Host": "a.test"}),  # no endpoint
            c.ask("/x", {"Host": "secure.test"}),  # to HTTPS
            c.ask("/app", {"Host": "a.test"}),  # proxied, on the same connection
        ]
    finally:
        c.close()
    assert [a.status for a in answers] == [404, 404, 503, 301, 200]
    assert all(a.headers.get("connection") == "keep-alive" for a in answers[:4])


@pytest.mark.parametrize("strict", [False, True])
def test_paths_a_backend_may_read_otherwise(
    either_fast_path: Ferryman, backends: Backends, strict: bool
) -> None:
    """Without --strict-request-paths, "/public/..;/internal" reaches the /public
    backend as sent (a Java backend reads it as /internal): Ingress paths are not
    an authorisation boundary. With it, such targets are answered 400."""
    ferryman = either_fast_path
    if strict:
        ferryman.extra_args.append("--strict-request-paths")
    ferryman.write("svc-pub", service_with_backends("pub", [backends.start("pub")]))
    ferryman.write("svc-int", service_with_backends("int", [backends.start("int")]))
    ferryman.write(
        "ing",
        ingress("p", [rule("p.test", path("/public", "pub"), path("/internal", "int"))]),
    )
    ferryman.start()
    tricky = [
        "/public/..;/internal",
        "/public/.;/x",
        "/public/%2e%2e/internal",
        "/public/%2E%2E%2Finternal",
        "/public/..%3b/internal",
        "/public/a%5c..%5cinternal",
        "/public/a\\..\\internal",
    ]
    for target in tricky:
        r = ask(ferryman, target, {"Host": "p.test"})
        if strict:
            assert r.status == 400, target
        else:
            assert r.status in (200, 404), target  # routed somehow, never refused
    plain = ask(ferryman, "/public/a.b/c;v=1?next=/../x%2f", {"Host": "p.test"})
    assert plain.seen()["name"] == "pub"
    if not strict:
        r = ask(ferryman, "/public/..;/internal", {"Host": "p.test"})
        assert (r.seen()["name"], r.seen()["path"]) == ("pub", "/public/..;/internal")


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_strict_request_paths_on_every_server(ferryman: Ferryman, backends: Backends) -> None:
    """--strict-request-paths is the Lua slow path's and the module's, which
    every server runs: the same 400 on NGINX 1.22, 1.30 and Angie."""
    ferryman.extra_args.append("--strict-request-paths")
    ferryman.write("svc-pub", service_with_backends("pub", [backends.start("pub")]))
    ferryman.write("ing", ingress("p", [rule("p.test", path("/public", "pub"))]))
    ferryman.start()
    assert ask(ferryman, "/public/..;/internal", {"Host": "p.test"}).status == 400
    assert ask(ferryman, "/public/a/b", {"Host": "p.test"}).seen()["name"] == "pub"


def _worker_rss_kb(f: Ferryman) -> dict[int, int]:
    master = f.nginx_master_pid()
    out = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            status = (proc / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if int(fields["PPid"]) == master and "VmRSS" in fields:
            out[int(proc.name)] = int(fields["VmRSS"].split()[0])
    return out


def test_unknown_host_flood_keeps_worker_memory_bounded(
    either_fast_path: Ferryman, backends: Backends
) -> None:
    """10,000 unique 7 KB Host headers: no worker caches them (they cannot be a
    virtual host's name), so worker memory stays where it was."""
    f = either_fast_path
    f.write("svc-a", service_with_backends("a", [backends.start("a")]))
    f.write("ing", ingress("a", [rule("a.test", path("/", "a"))]))
    f.start()
    label = "x" * 6900
    ask(f, "/", {"Host": f"warm.{label}.test"})  # each worker's code and buffers
    before = _worker_rss_kb(f)

    statuses: list[int] = []

    def flood(first: int, count: int) -> None:
        c = Connection(f.http_port)
        for i in range(first, first + count):
            try:
                r = c.ask("/", {"Host": f"h{i}.{label}.test"})
            except ConnectionError:  # closed after a 404 (before keep-alive was kept)
                c.close()
                c = Connection(f.http_port)
                r = c.ask("/", {"Host": f"h{i}.{label}.test"})
            statuses.append(r.status)
        c.close()

    threads = [threading.Thread(target=flood, args=(n * 2500, 2500)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = _worker_rss_kb(f)
    assert statuses == [404] * 10_000
    grown = {pid: (after[pid] - before[pid]) // 1024 for pid in before if pid in after}
    assert len(grown) == 2
    assert max(grown.values()) < 16, f"worker RSS grew by {grown} MB"
    assert ask(f, "/", {"Host": "a.test"}).seen()["name"] == "a"
