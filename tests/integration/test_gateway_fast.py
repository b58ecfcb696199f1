"""HTTPRoute matches served by ngx_http_ferryman_module from the F record
kinds/gateway/records/fast.py writes, on every server.

The Gateway server's location routes in Lua only, and its W records never
reach the module (fast.py's docstring), so this pushes the records the way
test_gateway_routes.py does: the G items' V record, its F record and a stub H
for a host of the main server, whose location the module routes. What it
shows: the module answers a fast location's requests as the Lua router
answers them from the G items (element-wise prefixes, Exact first, weights),
counted on the fast path, and hands every other request (a conditional first
match, a filter, a path no location takes) to the Lua router, which answers
as before. The answers are checked against Gateway API's order for any paths
by tests/unit/test_gateway_fast.py."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ferryman.configs.model import VirtualHost
from ferryman.configs.routes import encode_host
from ferryman.kinds.gateway.parse.gateway_api import parse_gateway, parse_http_route
from ferryman.kinds.gateway.records.attach import attach
from ferryman.kinds.gateway.records.fast import gateway_fast_record
from ferryman.kinds.gateway.records.routes import gateway_record
from testkit.harness import Backend, Backends, Ferryman, eventually, fast_path_counts

pytestmark = pytest.mark.flavours("nginx", "nginx-1.30", "angie")

HOST = "gw-fast.example.com"
# A Service that exists but has no endpoint set.
NO_ENDPOINTS = "idle"


def _prefix(path: str, *backends: dict[str, Any], **match: Any) -> dict[str, Any]:
    return {
        "matches": [{"path": {"type": "PathPrefix", "value": path}, **match}],
        "backendRefs": list(backends),
    }


def _backend(name: str, weight: int = 1) -> dict[str, Any]:
    return {"name": name, "port": 80, "weight": weight}


def _records(
    rules: list[dict[str, Any]], backends: dict[str, Backend], host: str = HOST, fast: bool = True
) -> list[str]:
    """The push's lines for ``host``: E, then V and F (``fast``: else none),
    then H (the stub last: once it is in force, its routing is there)."""
    route = parse_http_route(
        {
            "metadata": {
                "name": "r",
                "namespace": "default",
                "creationTimestamp": "2026-01-01T00:00:00Z",
            },
            "spec": {"parentRefs": [{"name": "gw"}], "hostnames": [host], "rules": rules},
        }
    ).resource
    gateway = parse_gateway(
        {
            "metadata": {"name": "gw", "namespace": "default"},
            "spec": {
                "gatewayClassName": "ferryman",
                "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
            },
        }
    ).resource
    assert route is not None and gateway is not None
    att = attach(
        [gateway], [route], [], lambda ns, n: None, lambda ns: {},
        lambda ns, n: n in backends or n == NO_ENDPOINTS,
    )  # fmt: skip
    entries = att.table[("default", "gw", "http")][host]
    record, used = gateway_record(entries)
    program = gateway_fast_record(entries)
    lines = []
    for key in sorted(used):
        service = key.partition("/")[2].partition(":")[0]
        if service == NO_ENDPOINTS:
            continue
        lines.append(f"E\t{key}\t127.0.0.1#{backends[service].port}")
    lines.append(f"V\t{host}\t{record}")
    if fast and program is not None:
        lines.append(f"F\t{host}\t{program}")
    lines.append(f"H\t{host}\t{encode_host(VirtualHost(host, (), None))}")
    return lines


def test_path_rules_served_by_the_module(ferryman: Ferryman, backends: Backends) -> None:
    named = {n: backends.start(n) for n in ("p0", "exact", "header", "h", "v1", "v2", "filtered")}
    set_header = {
        "type": "RequestHeaderModifier",
        "requestHeaderModifier": {"set": [{"name": "X-Set", "value": "1"}]},
    }
    rules = [
        _prefix("/p0", _backend("p0")),
        _prefix("/idle", _backend(NO_ENDPOINTS)),
        {**_prefix("/idle-slow", _backend(NO_ENDPOINTS)), "filters": [set_header]},
        {
            "matches": [{"path": {"type": "Exact", "value": "/e"}}],
            "backendRefs": [_backend("exact")],
        },
        # A conditional first match: its location stays the Lua router's.
        _prefix("/h", _backend("header"), headers=[{"name": "X-Version", "value": "two"}]),
        _prefix("/h", _backend("h")),
        _prefix("/w", _backend("v1", 1), _backend("v2", 3)),
        {**_prefix("/f", _backend("filtered")), "filters": [set_header]},
    ]
    ferryman.start()
    lines = _records(rules, named)
    assert any(line.startswith("F\t") for line in lines)
    r = ferryman.push_lines(lines)
    assert r.status_code == 200, r.text

    def by(path: str, **headers: str) -> tuple[str, str]:
        """(the backend's name or the status, which path answered)."""
        before = fast_path_counts(ferryman)
        r = ferryman.get(HOST, path, headers=headers)
        after = fast_path_counts(ferryman)
        moved = (after[0] - before[0], after[1] - before[1])
        taken = {(1, 0): "module", (0, 1): "lua"}.get(moved, f"counts moved by {moved}")
        return (r.served_by if r.status == 200 else str(r.status)) or "", taken

    eventually(lambda: by("/p0") == ("p0", "module"), 60, "the records live")
    assert by("/p0/x/y") == ("p0", "module")
    assert by("/p0x") == ("404", "lua")  # element-wise: no location of ours; Lua's 404
    assert by("/e") == ("exact", "module")
    assert by("/e/") == ("404", "lua")
    assert by("/h/x", **{"X-Version": "two"}) == ("header", "lua")
    assert by("/h/x") == ("h", "lua")  # the fall-through, in Lua
    r = ferryman.get(HOST, "/f")
    assert r.json()["headers"]["x-set"] == "1"
    assert by("/f") == ("filtered", "lua")
    # A Service without endpoints: the module answers as the Lua router does.
    idle, idle_slow = by("/idle"), by("/idle-slow")
    assert idle[1] == "module" and idle_slow[1] == "lua" and idle[0] == idle_slow[0], (
        idle,
        idle_slow,
    )
    seen = [by("/w")[0] for _ in range(200)]
    assert all(by("/w")[1] == "module" for _ in range(5))
    # 1:3 of 200 is 50 v1, standard deviation 6.1: within about 4.5 of them.
    assert 22 <= seen.count("v1") <= 78 and seen.count("v1") + seen.count("v2") == 200
    assert ferryman.reloads() == 1


_SEGMENTS = ["/a", "/b", "/ab", "/a/b", "/a/", "/", "/a/bc", "/b/a"]
_URIS = [*_SEGMENTS, "/abc", "/a/b/c", "/b/", "/c", "/a//b", "/a/./b", "/A"]


@st.composite
def _rules(draw: st.DrawFn) -> list[dict[str, Any]]:
    rules = []
    for i in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["Exact", "PathPrefix"]))
        match: dict[str, Any] = {"path": {"type": kind, "value": draw(st.sampled_from(_SEGMENTS))}}
        if draw(st.integers(0, 3)) == 0:
            match["headers"] = [{"name": "X-H", "value": "1"}]
        rules.append({"matches": [match], "backendRefs": [_backend(f"s{i}")]})
    return rules


def test_the_module_answers_as_the_lua_router(ferryman: Ferryman, backends: Backends) -> None:
    """Random path rules on two hosts, one with the F record, one without: every
    request gets the same answer from both, and the module takes some of them."""
    named = {f"s{i}": backends.start(f"s{i}") for i in range(5)}
    ferryman.start()
    examples = itertools.count()
    proxied = []

    @settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(_rules())
    def check(rules: list[dict[str, Any]]) -> None:
        n = next(examples)
        fast, slow = f"f{n}.gw-fast.example.com", f"s{n}.gw-fast.example.com"
        lines = _records(rules, named, fast) + _records(rules, named, slow, fast=False)
        r = ferryman.push_lines(lines)
        assert r.status_code == 200, r.text
        before = fast_path_counts(ferryman)[0]
        for uri in _URIS:
            for headers in ({}, {"X-H": "1"}):
                answers = [ferryman.get(h, uri, headers=headers) for h in (fast, slow)]
                seen = [a.served_by if a.status == 200 else a.status for a in answers]
                assert seen[0] == seen[1], (uri, headers, seen, rules)
        proxied.append(fast_path_counts(ferryman)[0] - before)

    check()
    assert sum(proxied) > 0, proxied
    assert ferryman.reloads() == 1
