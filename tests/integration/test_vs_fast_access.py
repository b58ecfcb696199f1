"""accessControl in ngx_http_ferryman_module (ngx_http_ferryman_access.c): a
VirtualServer route whose policies are accessControl (and rate limits) is
served by the module, which refuses as the Lua router does (403, NGINX's page)
on the client's address, IPv4 and IPv6, after the route's rate limits; the
VirtualServer's own list covers its routes and the requests no route takes;
Policies change with no reload; no F record with networks, however malformed,
crashes NGINX.

Which path answered is read from ferryman_fast_path_requests_total
(testkit/fast_path.py): a request the module refuses is the module's too. The
answers themselves are checked against Python's ipaddress by
test_vs_access_property.py, whose routes the module now serves."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings

from testkit.fast_path import _push_raw, _start, _workers, virtual_server
from testkit.harness import Backends, Ferryman, eventually, fast_path_counts
from testkit.vs_fast import mutated
from testkit.vs_policies import policy

pytestmark = pytest.mark.flavours("nginx", "nginx-1.30", "angie")

HOST = "vs-fast.example.com"


def access(name: str, **rules: list[str]) -> dict[str, Any]:
    return policy(name, accessControl=rules)


def route(path: str, *policies: str, **action: Any) -> dict[str, Any]:
    return {
        "path": path,
        "action": action or {"pass": "a"},
        "policies": [{"name": p} for p in policies],
    }


def from_(
    f: Ferryman, client: str, path: str, host: str = HOST, *, counted: bool = True
) -> tuple[str, str]:
    """(the backend's name or the status and the body's title, which path took
    it) for GET ``path`` sent from ``client`` (a loopback address). ``counted``
    False: the path is not asked ("" for it), sparing two /metrics scrapes."""
    before = fast_path_counts(f) if counted else (0.0, 0.0)
    server = f"[{client}]" if ":" in client else "127.0.0.1"
    transport = httpx.HTTPTransport(local_address=client)
    with httpx.Client(transport=transport, timeout=10) as c:
        r = c.get(f"http://{server}:{f.http_port}{path}", headers={"Host": host})
    after = fast_path_counts(f) if counted else (0.0, 0.0)
    moved = (after[0] - before[0], after[1] - before[1])
    taken = {(1, 0): "module", (0, 1): "lua"}.get(moved, f"counts moved by {moved}")
    taken = taken if counted else ""
    if r.status_code == 200:
        return str(r.json()["name"]), taken
    return f"{r.status_code} {r.text.split('<title>')[1].split('</title>')[0]}", taken


FORBIDDEN = "403 403 Forbidden"


def test_allow_and_deny_lists_in_the_module(ferryman: Ferryman, backends: Backends) -> None:
    _start(
        ferryman,
        backends,
        access("allow", allow=["127.0.0.2", "127.0.1.0/24"]),
        access("deny", deny=["127.0.0.3"]),
        virtual_server(
            [
                route("/allow", "allow"),
                route("/deny", "deny"),
                # Slow (a rewrite): the Lua router's answer to compare with.
                route("/slow", "allow", proxy={"upstream": "a", "rewritePath": "/x"}),
                {"path": "/", "action": {"pass": "b"}},
            ]
        ),
    )
    eventually(lambda: from_(ferryman, "127.0.0.1", "/")[0] == "b", 60, "VirtualServer live")
    assert from_(ferryman, "127.0.0.2", "/allow") == ("a", "module")
    assert from_(ferryman, "127.0.1.9", "/allow") == ("a", "module")
    assert from_(ferryman, "127.0.0.1", "/allow") == (FORBIDDEN, "module")
    assert from_(ferryman, "127.0.0.1", "/deny") == ("a", "module")
    assert from_(ferryman, "127.0.0.3", "/deny") == (FORBIDDEN, "module")
    assert from_(ferryman, "127.0.0.1", "/") == ("b", "module")
    # The same refusal as the slow path's, page and all.
    assert from_(ferryman, "127.0.0.1", "/slow") == (FORBIDDEN, "lua")
    url = f"http://127.0.0.1:{ferryman.http_port}"
    module = httpx.get(f"{url}/allow", headers={"Host": HOST})
    lua = httpx.get(f"{url}/slow", headers={"Host": HOST})
    assert (module.status_code, module.text) == (lua.status_code, lua.text)
    assert ferryman.reloads() == 1


def test_rate_limits_count_before_access_refuses(ferryman: Ferryman, backends: Backends) -> None:
    once = {"rate": "1r/m", "key": "${binary_remote_addr}", "zoneSize": "1M", "rejectCode": 429}
    _start(
        ferryman,
        backends,
        access("allow", allow=["127.0.0.1"]),
        policy("once", rateLimit=once),
        virtual_server([route("/both", "once", "allow"), {"path": "/", "action": {"pass": "b"}}]),
    )
    eventually(lambda: from_(ferryman, "127.0.0.1", "/")[0] == "b", 60, "VirtualServer live")
    assert from_(ferryman, "127.0.0.1", "/both") == ("a", "module")
    assert from_(ferryman, "127.0.0.1", "/both") == ("429 429 Too Many Requests", "module")
    # Refused by the list, yet counted in its bucket first (limit_req runs in
    # NGINX's preaccess phase, allow/deny in the access phase; NIC's order).
    assert from_(ferryman, "127.0.0.4", "/both") == (FORBIDDEN, "module")
    assert from_(ferryman, "127.0.0.4", "/both") == ("429 429 Too Many Requests", "module")


def test_ipv6_clients(ferryman: Ferryman, backends: Backends) -> None:
    _start(
        ferryman,
        backends,
        access("v6-in", allow=["::1"]),
        access("v6-out", deny=["::1/128"]),
        access("v4", allow=["127.0.0.0/8"]),
        access("v6-net", allow=["::/96"]),
        virtual_server(
            [
                route("/in", "v6-in"),
                route("/out", "v6-out"),
                route("/v4", "v4"),
                route("/net", "v6-net"),
                {"path": "/", "action": {"pass": "b"}},
            ]
        ),
    )
    eventually(lambda: from_(ferryman, "::1", "/")[0] == "b", 60, "VirtualServer live")
    assert from_(ferryman, "::1", "/in") == ("a", "module")
    assert from_(ferryman, "127.0.0.1", "/in") == (FORBIDDEN, "module")
    assert from_(ferryman, "::1", "/out") == (FORBIDDEN, "module")
    assert from_(ferryman, "127.0.0.1", "/out") == ("a", "module")
    # An IPv6 client is none of the IPv4 networks.
    assert from_(ferryman, "::1", "/v4") == (FORBIDDEN, "module")
    assert from_(ferryman, "::1", "/net") == ("a", "module")
    assert from_(ferryman, "127.0.0.1", "/net") == (FORBIDDEN, "module")


def test_the_virtual_servers_own_list(ferryman: Ferryman, backends: Backends) -> None:
    _start(
        ferryman,
        backends,
        access("host", deny=["127.0.0.3"]),
        access("own", allow=["127.0.0.3"]),
        virtual_server(
            [route("/own", "own"), {"path": "/plain", "action": {"pass": "b"}}],
            policies=[{"name": "host"}],
        ),
    )
    eventually(lambda: from_(ferryman, "127.0.0.1", "/plain")[0] == "b", 60, "VirtualServer live")
    # Inherited by a route without its own; a route's own one replaces it.
    assert from_(ferryman, "127.0.0.3", "/plain") == (FORBIDDEN, "module")
    assert from_(ferryman, "127.0.0.3", "/own") == ("a", "module")
    assert from_(ferryman, "127.0.0.1", "/own") == (FORBIDDEN, "module")
    # No route: the VirtualServer's list, then 404, in the module.
    assert from_(ferryman, "127.0.0.3", "/nowhere") == (FORBIDDEN, "module")
    assert from_(ferryman, "127.0.0.1", "/nowhere") == ("404 404 Not Found", "module")


def test_policies_change_and_go_with_no_reload(ferryman: Ferryman, backends: Backends) -> None:
    _start(
        ferryman,
        backends,
        access("list", allow=["127.0.0.2"]),
        virtual_server([route("/g", "list"), {"path": "/", "action": {"pass": "b"}}]),
    )
    eventually(lambda: from_(ferryman, "127.0.0.2", "/g")[0] == "a", 60, "VirtualServer live")
    reloads = ferryman.reloads()
    assert from_(ferryman, "127.0.0.1", "/g") == (FORBIDDEN, "module")
    ferryman.write("doc-0", access("list", deny=["127.0.0.2"]))
    eventually(lambda: from_(ferryman, "127.0.0.1", "/g")[0] == "a", 30, "the new list")
    assert from_(ferryman, "127.0.0.2", "/g") == (FORBIDDEN, "module")
    # The route without its policy: a plain route.
    ferryman.write("doc-1", virtual_server([route("/g"), {"path": "/", "action": {"pass": "b"}}]))
    eventually(lambda: from_(ferryman, "127.0.0.2", "/g") == ("a", "module"), 30, "no policy")
    assert ferryman.reloads() == reloads


# No F record with networks crashes NGINX.


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# A valid record: "/" allows 127.0.0.0/8 and ::1, then passes to a.
BASE = (
    f"1 u {_b64('default/a:80')} 0 1 10000 0 0 0 0 l P {_b64('/')} 0 a 1 2 4.7f000000.8"
    f" 6.{'0' * 31}1.128 f 0 1 100 1 g 0 1 4.0a000000.8"
)
TOKENS = ["0", "1", "2", "3", "a", "g", "f", "q", "4.7f000001.32", "4.7f000001.33", "6.00.0",
          "4.7f0000.8", "4.7f00000g.8", "6." + "f" * 32 + ".129", "6." + "f" * 33 + ".1", "4.",
          "4.7f000001.", ".", "5.7f000001.8", "4.7f000001.08", "4.7f000001.999999999999",
          "999999999", "-", "", " "]  # fmt: skip


@pytest.fixture
def guarded_host(ferryman: Ferryman, backends: Backends) -> tuple[Ferryman, set[int]]:
    _start(ferryman, backends, virtual_server([{"path": "/", "action": {"pass": "a"}}]))
    eventually(lambda: from_(ferryman, "127.0.0.1", "/")[1] == "module", 60, "VirtualServer live")
    _push_raw(ferryman, f"F\t{HOST}\tx")
    _push_raw(ferryman, f"F\t{HOST}\t{BASE}")
    eventually(lambda: from_(ferryman, "::1", "/") == ("a", "module"), 60, "the raw record")
    assert from_(ferryman, "127.0.1.1", "/") == ("a", "module")
    # The start-up reload's old workers exit in their own time (test_vs_fast_path).
    eventually(lambda: len(_workers(ferryman)) == 2, 60, "the old workers gone")
    return ferryman, _workers(ferryman)


@pytest.mark.flavours("nginx")
@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(record=mutated(BASE, TOKENS))
def test_no_f_record_with_networks_crashes_nginx(
    guarded_host: tuple[Ferryman, set[int]], record: str
) -> None:
    f, workers = guarded_host
    _push_raw(f, f"F\t{HOST}\t{record.strip()}")
    for client, path in (("127.0.0.1", "/"), ("::1", "/x"), ("127.0.0.1", "/r")):
        try:
            who, _ = from_(f, client, path, counted=False)
        except httpx.RemoteProtocolError:
            # A mutated record may give the upstream a 1 ms timeout (as in
            # test_vs_fast_path.py); whether a worker survived is checked below.
            continue
        assert who.split(" ")[0] in ("a", "403", "404", "502", "503", "504"), (record, who)
    assert _workers(f) == workers, f"a worker died on F record {record!r}"


def test_a_malformed_network_leaves_the_host_to_the_slow_path(
    ferryman: Ferryman, backends: Backends
) -> None:
    _start(
        ferryman,
        backends,
        access("allow", allow=["127.0.0.2"]),
        virtual_server([route("/g", "allow"), {"path": "/", "action": {"pass": "b"}}]),
    )
    eventually(lambda: from_(ferryman, "127.0.0.2", "/g") == ("a", "module"), 60, "live")
    eventually(lambda: len(_workers(ferryman)) == 2, 60, "the old workers gone")
    workers = _workers(ferryman)
    # A prefix beyond /32: the module refuses the whole record; the Lua
    # router serves the host from its V record, the Policy still enforced.
    bad = (
        f"1 u {_b64('default/a:80')} 0 1 10000 0 0 0 0 u {_b64('default/b:80')} 0 1 10000 0 0 0 0"
        f" l P {_b64('/g')} 0 a 1 1 4.7f000002.33 f 0 1 100 1 l P {_b64('/')} 0 f 0 1 100 2"
    )
    _push_raw(ferryman, f"F\t{HOST}\t{bad}")
    eventually(lambda: from_(ferryman, "127.0.0.2", "/g") == ("a", "lua"), 30, "slow path")
    assert from_(ferryman, "127.0.0.1", "/g") == (FORBIDDEN, "lua")
    assert from_(ferryman, "127.0.0.1", "/") == ("b", "lua")
    assert _workers(ferryman) == workers


# ingress-nginx's source-range lists: the same check, on an Ingress's routes.


def test_ingress_source_ranges_in_the_module(ferryman: Ferryman, backends: Backends) -> None:
    from testkit.annotated_ingress import HOST as INGRESS_HOST
    from testkit.annotated_ingress import annotated, start

    p = "nginx.ingress.kubernetes.io/"
    start(ferryman, backends, annotated({p + "whitelist-source-range": "127.0.0.2, ::1"}))
    eventually(
        lambda: from_(ferryman, "127.0.0.2", "/", INGRESS_HOST) == ("a", "module"), 60, "live"
    )
    assert from_(ferryman, "::1", "/", INGRESS_HOST) == ("a", "module")
    assert from_(ferryman, "127.0.0.1", "/", INGRESS_HOST) == (FORBIDDEN, "module")
    # Denied first, then allowed (ingress-nginx's order): 127.0.0.2 is out.
    lists = {p + "whitelist-source-range": "127.0.0.0/8", p + "denylist-source-range": "127.0.0.2"}
    ferryman.write("doc0", annotated(lists))
    eventually(
        lambda: from_(ferryman, "127.0.0.2", "/", INGRESS_HOST) == (FORBIDDEN, "module"),
        30,
        "the new lists",
    )
    assert from_(ferryman, "127.0.0.3", "/", INGRESS_HOST) == ("a", "module")
    assert ferryman.reloads() == 1
