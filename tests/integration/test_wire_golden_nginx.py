"""The wire protocol's golden vectors (tests/golden/wire/push.json) decoded by the
data plane: the very bytes the Python test checks ferryman's encoders against.

Lua: ferryman_records.lua's POST /push in a bare NGINX stores each record of the
golden bodies under "<kind>:<key>" with its value, byte for byte (read back from
its shared dict), and removes what a push removes.

C: ngx_http_ferryman_module has no read-back of its zone, so its decoding is
observed through what the records drive, in a running ferryman's NGINX: the golden
full push, sent as it is, makes the module route the H hosts to the E endpoint
sets, serve the F routes itself, and ngx_stream_ferryman_module forward the S
listener's connections; the incremental push's changed endpoint set and removed
host take effect. The endpoints are the vectors' own (127.0.55.0/24)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from testkit.harness import Backends, Ferryman, eventually, fast_path_counts, free_port
from testkit.lua_nginx import running
from testkit.wire_vectors import GLOBAL_CONFIGURATION, Push, body_bytes, load, state_after

LUA_HTTP = """
    lua_shared_dict ferryman 4m;
    lua_shared_dict ferryman_balancer 1m;
    lua_shared_dict ferryman_gone 1m;
    server {{
        listen unix:{sock};
        location = /push {{ content_by_lua_block {{ require("ferryman_records").push() }} }}
        location = /version {{ content_by_lua_block {{ require("ferryman_records").version() }} }}
        location = /dump {{
            content_by_lua_block {{
                local store = ngx.shared.ferryman
                for _, name in ipairs(store:get_keys(0)) do
                    if name ~= "version" then
                        ngx.print(name, "\\t", store:get(name), "\\n")
                    end
                end
            }}
        }}
    }}"""


def _client(sock: Path) -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), timeout=10)


def _push(sock: Path, push: Push) -> None:
    """POST the committed body; every record in force (no refusal line)."""
    with _client(sock) as c:
        r = c.post("http://nginx/push", content=body_bytes(push))
    assert r.status_code == 200, r.text
    version, dict_fill, *refused = r.text.splitlines()
    assert version == str(push.version)
    assert dict_fill.startswith("M\tdict\t")
    assert refused == []


@pytest.fixture
def lua_push(tmp_path: Path) -> Iterator[Path]:
    sock = tmp_path / "push.sock"

    def answering() -> bool:
        with _client(sock) as c:
            return c.get("http://nginx/version").status_code == 200

    with running(tmp_path, LUA_HTTP.format(sock=sock), answering):
        yield sock


def test_lua_decodes_the_golden_pushes(lua_push: Path) -> None:
    pushes = load()
    for n, push in enumerate(pushes, 1):
        _push(lua_push, push)
        with _client(lua_push) as c:
            dumped = c.get("http://nginx/dump").content.decode("utf-8")
            version = c.get("http://nginx/version").text.strip()
        held = dict(line.split("\t", 1) for line in dumped.splitlines())
        assert held == state_after(pushes[:n]), push.name
        assert version == str(push.version)


# ---- C: ngx_http_ferryman_module and ngx_stream_ferryman_module --------------------


def _served(f: Ferryman, host: str, path: str, https: bool = False) -> tuple[str | None, str]:
    """(the backend that answered, or the status; "module" or "lua": which path took it)."""
    before = fast_path_counts(f)
    r = f.get(host, path, https=https)
    after = fast_path_counts(f)
    moved = (after[0] - before[0], after[1] - before[1])
    taken = {(1, 0): "module", (0, 1): "lua"}.get(moved, f"counts moved by {moved}")
    return (r.served_by if r.status == 200 else str(r.status)), taken


def _tcp_ask(port: int) -> bytes:
    answer = b""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET / HTTP/1.0\r\nHost: stream\r\n\r\n")
        while chunk := s.recv(4096):
            answer += chunk
    return answer


def test_the_module_decodes_the_golden_pushes(ferryman: Ferryman, backends: Backends) -> None:
    full, incremental, _ = load()
    for name, address, port in (
        ("tea", "127.0.55.1", 8080),
        ("coffee-a", "127.0.55.2", 8080),
        ("coffee-b", "127.0.55.3", 8080),
        ("echo", "127.0.55.4", 7000),
        ("tea-new", "127.0.55.5", 8080),
    ):
        backends.start(name, address, port)
    tcp_port = free_port()
    # Only the stream listener's server (a directive, not a record): every record
    # NGINX holds comes from the golden pushes.
    ferryman.write(
        "gc",
        {
            "apiVersion": "k8s.nginx.org/v1",
            "kind": "GlobalConfiguration",
            "metadata": {"name": GLOBAL_CONFIGURATION[1], "namespace": GLOBAL_CONFIGURATION[0]},
            "spec": {"listeners": [{"name": "golden-tcp", "port": tcp_port, "protocol": "TCP"}]},
        },
    )
    ferryman.extra_args += ["--global-configuration", "/".join(GLOBAL_CONFIGURATION)]
    ferryman.start()
    sock = ferryman.endpoints_socket()
    assert _served(ferryman, "cafe.example.com", "/tea")[0] == "404"
    reloads = ferryman.reloads()

    _push(sock, full)
    # H and E in the module: a Prefix path, an Exact one, a wildcard host.
    wild = ("x.wild.example.com", "/any")
    eventually(lambda: _served(ferryman, *wild) == ("tea", "module"), what="the push live")
    # cafe.example.com: TLS (its C record's certificate, for Lua) and the redirect flag.
    assert _served(ferryman, "cafe.example.com", "/tea")[0] in ("301", "308")
    assert _served(ferryman, "cafe.example.com", "/tea/cup", https=True) == ("tea", "module")
    assert _served(ferryman, "cafe.example.com", "/coffee/x", https=True)[0] == "404"
    coffee = {_served(ferryman, "cafe.example.com", "/coffee", https=True) for _ in range(6)}
    assert coffee == {("coffee-a", "module"), ("coffee-b", "module")}
    # F: the VirtualServer's routes the module serves itself (a prefix, a regex, a
    # header match and its default).
    assert _served(ferryman, "vs.example.com", "/tea") == ("tea", "module")
    assert _served(ferryman, "vs.example.com", "/r12")[0] in ("coffee-a", "coffee-b")
    assert _served(ferryman, "vs.example.com", "/match") == ("tea", "module")
    matched = ferryman.get("vs.example.com", "/match", headers={"X-Version": "v2"})
    assert matched.served_by in ("coffee-a", "coffee-b")
    # accessControl in the module: an allow list holding 127.0.0.1, a deny list
    # holding it.
    assert _served(ferryman, "vs.example.com", "/guarded") == ("tea", "module")
    assert _served(ferryman, "vs.example.com", "/closed") == ("403", "module")
    # S: the stream listener forwards to its record's endpoint set.
    assert b'"name": "echo"' in _tcp_ask(tcp_port)

    _push(sock, incremental)
    # The changed endpoint set (E) and the removed host (H, empty value).
    eventually(
        lambda: (
            {_served(ferryman, "vs.example.com", "/tea")[0] for _ in range(6)} == {"tea", "tea-new"}
        ),
        what="the incremental push live",
    )
    assert _served(ferryman, *wild)[0] == "404"
    assert ferryman.reloads() == reloads
