"""VirtualServer routes in ngx_http_ferryman_module (``kinds/virtualserver/records/fast.py``, the F
record): which routes the module proxies itself and which it hands to the Lua
slow path, what the module's own routes do (splits, timeouts, tries, an upstream
without endpoints), and that no F record, however malformed, crashes NGINX.

The property tests (test_vs_router_property.py, test_vs_match_property.py)
compare the module's location choice and matches with the reference.
"""

from __future__ import annotations

import base64
from collections import Counter

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testkit.fast_path import HOST, _push_raw, _start, _workers, answer, virtual_server
from testkit.harness import (
    Backends,
    BrokenBackend,
    Ferryman,
    eventually,
    fast_path_counts,
    service_with_backends,
)


def test_routes_the_module_serves_and_those_it_hands_to_lua(
    ferryman: Ferryman, backends: Backends
) -> None:
    upstreams = [
        {"name": "a", "service": "a", "port": 80},
        {"name": "b", "service": "b", "port": 80, "lb-method": "least_conn"},
        {"name": "rnd", "service": "a", "port": 80, "lb-method": "random"},
        {"name": "empty", "service": "empty", "port": 80},
    ]
    routes = [
        {"path": "/pass", "action": {"pass": "a"}},
        {"path": "=/exact", "action": {"pass": "b"}},
        {"path": "~^/re[0-9]", "action": {"pass": "b"}},
        {"path": "/plain-proxy", "action": {"proxy": {"upstream": "b"}}},
        {
            "path": "/matched",
            "matches": [
                {"conditions": [{"header": "X-Pick", "value": "b"}], "action": {"pass": "b"}}
            ],
            "action": {"pass": "a"},
        },
        {"path": "/rewrite", "action": {"proxy": {"upstream": "a", "rewritePath": "/new"}}},
        {"path": "/redirect", "action": {"redirect": {"url": "https://example.com", "code": 302}}},
        {"path": "/return", "action": {"return": {"body": "returned"}}},
        {"path": "/random", "action": {"pass": "rnd"}},
        {
            "path": "/errors",
            "action": {"pass": "a"},
            "errorPages": [{"codes": [502], "return": {"code": 200, "body": "sorry"}}],
        },
        {"path": "/dir/", "action": {"pass": "a"}},
        {"path": "/nothing", "action": {"pass": "empty"}},
    ]
    _start(ferryman, backends, virtual_server(routes, upstreams))
    eventually(lambda: answer(ferryman, "/pass")[0] == "a", 60, "VirtualServer live")

    assert answer(ferryman, "/pass/x") == ("a", "module")
    assert answer(ferryman, "/exact") == ("b", "module")
    assert answer(ferryman, "/re5") == ("b", "module")
    assert answer(ferryman, "/plain-proxy") == ("b", "module")
    assert answer(ferryman, "/matched", headers={"X-Pick": "B"}) == ("b", "module")
    assert answer(ferryman, "/matched") == ("a", "module")
    assert answer(ferryman, "/dir/x") == ("a", "module")
    # The slow path's: route actions and upstreams the module does not serve.
    assert answer(ferryman, "/rewrite") == ("a", "lua")
    assert answer(ferryman, "/redirect")[1] == "lua"
    assert answer(ferryman, "/return") == ("200 returned", "lua")
    assert answer(ferryman, "/random") == ("a", "lua")
    assert answer(ferryman, "/errors") == ("a", "lua")
    # auto_redirect and no route: answered in Lua, as before.
    assert answer(ferryman, "/dir")[0].startswith("301")
    assert answer(ferryman, "/dir")[1] == "lua"
    assert answer(ferryman, "/elsewhere")[0].startswith("404")
    # An upstream without endpoints: the module answers 503 itself (the split
    # already rolled), as the slow path does.
    who, _ = answer(ferryman, "/nothing")
    assert who.startswith("503")


def test_a_split_is_rolled_per_request_in_the_module(
    ferryman: Ferryman, backends: Backends
) -> None:
    split = [{"weight": 20, "action": {"pass": "a"}}, {"weight": 80, "action": {"pass": "b"}}]
    _start(ferryman, backends, virtual_server([{"path": "/", "splits": split}]))
    eventually(lambda: answer(ferryman, "/")[1] == "module", 60, "VirtualServer live")
    # The counters once around all 300 (answer() reads them around each request,
    # two metrics scrapes a request: most of this test's time when it did).
    before = fast_path_counts(ferryman)
    with httpx.Client(base_url=f"http://127.0.0.1:{ferryman.http_port}", timeout=30) as client:
        answers = Counter(
            client.get(f"/{i}", headers={"Host": HOST}).json()["name"] for i in range(300)
        )
    after = fast_path_counts(ferryman)
    assert (after[0] - before[0], after[1] - before[1]) == (300, 0)  # all in the module
    assert set(answers) == {"a", "b"}
    # 20 %: 60 expected, far outside 30..95 has odds below 1e-6.
    assert 30 <= answers["a"] <= 95


def test_host_policies_keep_every_route_on_the_slow_path(
    ferryman: Ferryman, backends: Backends
) -> None:
    # egressMTLS: a policy the module does not enforce (accessControl and
    # rate limits it does: test_vs_fast_access.py, test_vs_fast_limits.py).
    allow = {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "Policy",
        "metadata": {"name": "allow-local", "namespace": "default"},
        "spec": {"egressMTLS": {"sslName": "backend.example.com"}},
    }
    host_policy = virtual_server(
        [{"path": "/", "action": {"pass": "a"}}], policies=[{"name": "allow-local"}]
    )
    route_policy = virtual_server(
        [
            {"path": "/guarded", "action": {"pass": "b"}, "policies": [{"name": "allow-local"}]},
            {"path": "/", "action": {"pass": "a"}},
        ],
        name="route-policy",
        host="route.example.com",
    )
    _start(ferryman, backends, allow, host_policy, route_policy)
    eventually(lambda: answer(ferryman, "/")[0] == "a", 60, "VirtualServer live")
    assert answer(ferryman, "/x") == ("a", "lua")
    eventually(lambda: answer(ferryman, "/", "route.example.com")[0] == "a", 60, "live")
    assert answer(ferryman, "/guarded", "route.example.com") == ("b", "lua")
    assert answer(ferryman, "/other", "route.example.com") == ("a", "module")


def test_an_upstreams_timeouts_and_tries_hold_in_the_module(
    ferryman: Ferryman, backends: Backends
) -> None:
    broken = [BrokenBackend() for _ in range(3)]
    for i, b in enumerate(broken):
        b.name = f"broken{i}"  # one EndpointSlice each
    upstreams = [
        {"name": "a", "service": "a", "port": 80, "read-timeout": "1s"},
        {"name": "broken", "service": "broken", "port": 80, "next-upstream-tries": 2},
    ]
    routes = [
        {"path": "/slow", "action": {"pass": "a"}},
        {"path": "/broken", "action": {"pass": "broken"}},
    ]
    ferryman.write("svc-broken", service_with_backends("broken", broken))
    try:
        _start(ferryman, backends, virtual_server(routes, upstreams))
        eventually(lambda: answer(ferryman, "/slow")[0] == "a", 60, "VirtualServer live")
        # The backend answers 200 after 3 s: a 504 is the 1 s read timeout's (a
        # bound on the time taken as well failed on a busy machine: 2.53 s).
        assert answer(ferryman, "/slow?delay=3") == ("504 <html>", "module")
        accepted = sum(b.accepted for b in broken)
        assert answer(ferryman, "/broken") == ("502 <html>", "module")
        # Two tries of three peers (max_fails 1 makes later requests skip them).
        assert sum(b.accepted for b in broken) - accepted == 2
    finally:
        for b in broken:
            b.close()


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# A valid record: "/" matches X-A against ~*^a and splits, else passes to a.
BASE = (
    f"1 u {_b64('default/a:80')} 0 1 10000 0 0 0 0 l P {_b64('/')} 0 f 1"
    f" 1 0 i {_b64('x-a')} {_b64('^a')} 2 50 1 50 1 1 100 1"
)
TOKENS = ["1", "0", "2", "100", "u", "l", "f", "s", "E", "P", "X", "I", "N", "-", "r", "i",
          _b64("/"), _b64("default/a:80"), _b64("(("), _b64("^/r"), _b64("x-a"), "999999999",
          "=", "", " "]  # fmt: skip


@pytest.fixture
def ferryman_with_a_host(ferryman: Ferryman, backends: Backends) -> tuple[Ferryman, set[int]]:
    _start(ferryman, backends, virtual_server([{"path": "/", "action": {"pass": "a"}}]))
    eventually(lambda: answer(ferryman, "/")[1] == "module", 60, "VirtualServer live")
    # The start-up reload's old workers exit gracefully, in their own time: the
    # workers to watch are the two (--worker-processes 2) left once they did.
    eventually(lambda: len(_workers(ferryman)) == 2, 60, "the old workers gone")
    return ferryman, _workers(ferryman)


@st.composite
def _records(draw: st.DrawFn) -> str:
    """Token soup around the grammar, and mutations of a valid record."""
    if draw(st.booleans()):
        return " ".join(draw(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=40)))
    tokens = BASE.split(" ")
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(tokens) - 1))
        tokens[i] = draw(st.sampled_from([*TOKENS, tokens[i][:-1], tokens[i] + "x"]))
    return " ".join(tokens)[: draw(st.integers(1, 400))]


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(record=_records())
def test_no_f_record_crashes_nginx(
    ferryman_with_a_host: tuple[Ferryman, set[int]], record: str
) -> None:
    f, workers = ferryman_with_a_host
    _push_raw(f, f"F\t{HOST}\t{record.strip()}")
    for path in ("/", "/r", "/x"):
        url = f"http://127.0.0.1:{f.http_port}{path}"
        try:
            r = httpx.get(url, headers={"Host": HOST}, timeout=10)
        except httpx.RemoteProtocolError:
            # A valid record may give the upstream a 1 ms read timeout: firing
            # after the headers went out, NGINX ends the connection mid-body.
            # (A worker that died would end it too: the check below tells.)
            continue
        # 504: that timeout firing before the headers.
        assert r.status_code in (200, 404, 502, 503, 504), (record, r.status_code)
    assert _workers(f) == workers, f"a worker died on F record {record!r}"
