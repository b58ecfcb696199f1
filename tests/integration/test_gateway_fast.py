"""HTTPRoute matches served by ngx_http_ferryman_module on a Gateway listener,
on every server: Gateway and HTTPRoute objects through the normal pipeline, the
X records kinds/gateway/records/servers.py pushes beside the W records, and the
Gateway server's ``ferryman_gateway_route`` (ngx_http_ferryman_gateway.c).

What it shows, with the fast-path counters saying which path answered each
request (so it fails where the module does not route Gateways): the module
answers a fast location's requests as the Lua router answers them from the W
record (element-wise prefixes, Exact first, weights, a Service without
endpoints, the name a listener hostname takes, "any host" routes), with the
headers the slow path sends, and hands every other request (a conditional
first match, a filter, HTTPS, a name a more specific listener holds without
routes) to the Lua router, which answers as before; route changes take no
reload. Then random path rules on pairs of hostnames, one whose rules all have
a filter (Lua's alone), get the same answers from both. The breadth of that
comparison is tests/unit/test_gateway_fast.py's, against Gateway API's order."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testkit.gateway_docs import gateway, gateway_class, get_at, route, to
from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    fast_path_counts,
    free_port,
    service_with_backends,
    tls_secret,
)

pytestmark = pytest.mark.flavours("nginx", "nginx-1.30", "angie")

# The Gateway has no address of its own (no --gateway-addresses): it listens on
# every address, its records are keyed "*", and the module looks the request's
# own address up first, then "*" (ngx_http_ferryman_gateway.c), as Lua does.
ADDRESS = "127.0.0.10"
HOST = "cafe.example.com"
# A Service that exists but has no endpoints.
IDLE = "idle"
SERVICES = ("p0", "exact", "header", "h", "v1", "v2", "filtered", "any", "tea", "moved")
RANDOM = tuple(f"s{i}" for i in range(4))
SET_HEADER = {
    "type": "RequestHeaderModifier",
    "requestHeaderModifier": {"set": [{"name": "X-Set", "value": "1"}]},
}
# What the Lua router and the module both send upstream, compared between them.
FORWARDED = ("host", "x-real-ip", "x-forwarded-for", "x-forwarded-host", "x-forwarded-port")


def _prefix(path: str, *backends: dict[str, Any], **match: Any) -> dict[str, Any]:
    return {
        "matches": [{"path": {"type": "PathPrefix", "value": path}, **match}],
        "backendRefs": list(backends),
    }


def _backend(name: str, weight: int = 1) -> dict[str, Any]:
    return {"name": name, "port": 80, "weight": weight}


def _rules(p0: str = "p0") -> list[dict[str, Any]]:
    return [
        _prefix("/p0", _backend(p0)),
        _prefix("/idle", _backend(IDLE)),
        {**_prefix("/idle-slow", _backend(IDLE)), "filters": [SET_HEADER]},
        {
            "matches": [{"path": {"type": "Exact", "value": "/e"}}],
            "backendRefs": [_backend("exact")],
        },
        # A conditional first match: its location stays the Lua router's.
        _prefix("/h", _backend("header"), headers=[{"name": "X-Version", "value": "two"}]),
        _prefix("/h", _backend("h")),
        _prefix("/w", _backend("v1", 1), _backend("v2", 3)),
        {**_prefix("/f", _backend("filtered")), "filters": [SET_HEADER]},
    ]


def _listeners(http: int, https: int) -> list[dict[str, Any]]:
    return [
        {"name": "http", "port": http, "protocol": "HTTP"},
        # A more specific listener of the socket without routes: its name is
        # never served by the "any host" routes, in C or in Lua.
        {"name": "held", "port": http, "protocol": "HTTP", "hostname": "held.example.com"},
        {
            "name": "https",
            "port": https,
            "protocol": "HTTPS",
            "hostname": "secure.example.com",
            "tls": {"certificateRefs": [{"name": "secure"}]},
        },
    ]


def _routes(p0: str = "p0", extra: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    cafe = route("cafe", "gw", [HOST], _rules(p0))
    cafe["spec"]["parentRefs"] = [{"name": "gw", "sectionName": "http"}]
    anything = route("any", "gw", [], [to("any")])
    anything["spec"]["parentRefs"] = [{"name": "gw", "sectionName": "http"}]
    wild = route("wild", "gw", ["*.wild.example.com"], [to("tea", "/t")])
    wild["spec"]["parentRefs"] = [{"name": "gw", "sectionName": "http"}]
    secure = route("secure", "gw", [], [to("tea")])
    secure["spec"]["parentRefs"] = [{"name": "gw", "sectionName": "https"}]
    return [cafe, anything, wild, secure, *(extra or [])]


@st.composite
def _random_rules(draw: st.DrawFn) -> list[dict[str, Any]]:
    rules = []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["Exact", "PathPrefix"]))
        match: dict[str, Any] = {"path": {"type": kind, "value": draw(st.sampled_from(_SEGMENTS))}}
        if draw(st.integers(0, 3)) == 0:
            match["headers"] = [{"name": "X-H", "value": "1"}]
        rules.append({"matches": [match], "backendRefs": [_backend(draw(st.sampled_from(RANDOM)))]})
    return rules


_SEGMENTS = ["/a", "/b", "/ab", "/a/b", "/a/", "/", "/a/bc", "/b/a"]
_URIS = [*_SEGMENTS, "/abc", "/a/b/c", "/b/", "/c", "/a//b", "/a/./b", "/A"]


def test_gateway_routes_served_by_the_module(ferryman: Ferryman, backends: Backends) -> None:
    services = [service_with_backends(n, [backends.start(n)]) for n in (*SERVICES, *RANDOM)] + [
        service_with_backends(IDLE, [])
    ]
    ferryman.write("services", *services)
    ferryman.write("secret", tls_secret("secure", ["secure.example.com"]))
    ferryman.write("class", gateway_class())
    http, https = free_port(), free_port()
    ferryman.write("gateways", gateway("gw", _listeners(http, https)))
    ferryman.write("routes", *_routes())
    # A small dict, so that a W record pushed by hand below is too large for it.
    ferryman.extra_args += ["--enable-gateway-api"]
    ferryman.extra_args += ["--records-memory-size", "2m"]
    ferryman.start()

    def by(host: str, path: str, **kw: Any) -> tuple[str, str]:
        """(the backend's name or the status, which path answered)."""
        before = fast_path_counts(ferryman)
        r = get_at(ADDRESS, https if kw.get("https") else http, host, path, **kw)
        after = fast_path_counts(ferryman)
        moved = (after[0] - before[0], after[1] - before[1])
        taken = {(1, 0): "module", (0, 1): "lua"}.get(moved, f"counts moved by {moved}")
        return (r.served_by if r.status == 200 else str(r.status)) or "", taken

    eventually(lambda: by(HOST, "/p0") == ("p0", "module"), 60, "the routes live")
    reloads = ferryman.reloads()
    assert by(HOST, "/p0/x/y") == ("p0", "module")
    assert by(HOST, "/p0x") == ("any", "module")  # element-wise: the "any host" route's "/"
    assert by(HOST, "/e") == ("exact", "module")
    assert by(HOST, "/h/x", **{"headers": {"X-Version": "two"}}) == ("header", "lua")
    assert by(HOST, "/h/x") == ("h", "lua")  # the fall-through, in Lua
    assert by(HOST, "/f") == ("filtered", "lua")
    assert by("other.example.com", "/f") == ("any", "module")  # the "_" record
    # A wildcard's record (the longest suffix first), whatever the Host's case.
    assert by("a.B.Wild.example.com", "/t/x") == ("tea", "module")
    assert by("a.wild.example.com", "/x") == ("any", "module")
    assert by("held.example.com", "/") == ("404", "lua")  # its listener's, without routes
    assert by("secure.example.com", "/", https=True) == ("tea", "lua")  # HTTPS: Lua's checks
    # A Service without endpoints: the module answers as the Lua router does.
    idle, idle_slow = by(HOST, "/idle"), by(HOST, "/idle-slow")
    assert idle[1] == "module" and idle_slow[1] == "lua" and idle[0] == idle_slow[0], (
        idle,
        idle_slow,
    )
    # The headers upstream: the module's as the slow path's.
    fast, slow = get_at(ADDRESS, http, HOST, "/p0"), get_at(ADDRESS, http, HOST, "/h")
    assert fast.served_by == "p0" and slow.served_by == "h"
    sent = [{k: r.json()["headers"].get(k) for k in FORWARDED} for r in (fast, slow)]
    assert sent[0] == sent[1] and sent[0]["x-forwarded-port"] == str(http), sent
    before = fast_path_counts(ferryman)
    seen = [get_at(ADDRESS, http, HOST, "/w").served_by for _ in range(100)]
    after = fast_path_counts(ferryman)
    assert (after[0] - before[0], after[1] - before[1]) == (100, 0)
    # 1:3 of 100 is 25 v1, standard deviation 4.3: within about 4.5 of them.
    assert 6 <= seen.count("v1") <= 44 and seen.count("v1") + seen.count("v2") == 100, seen
    # A W record the dict refuses takes its X out of the module, whether the X
    # came before it in the push or after: the name falls through to "_" in C
    # as in Lua, rather than the module serving routes Lua does not hold.
    to_tea = "1 u ZGVmYXVsdC90ZWE6ODA= 0 1 10000 0 0 0 0 l N Lw== 0 f 0 1 100 1"
    key = f"*:{http}/big%d.example.com"
    big = "- 0 - " + "x" * (3 << 20)
    lines = [f"X\t{key % 1}\t{to_tea}", f"W\t{key % 1}\t{big}", f"W\t{key % 2}\t{big}"]
    answer = ferryman.push_lines([*lines, f"X\t{key % 2}\t{to_tea}", f"X\t{key % 3}\t{to_tea}"])
    assert answer.status_code == 200 and answer.text.count("\tno_memory") == 2, answer.text
    eventually(lambda: by("big3.example.com", "/") == ("tea", "module"), what="the push")
    assert by("big1.example.com", "/") == ("any", "module")
    assert by("big2.example.com", "/") == ("any", "module")
    # A route change: records only.
    ferryman.write("routes", *_routes("moved"))
    eventually(lambda: by(HOST, "/p0") == ("moved", "module"), what="the edit live")
    assert ferryman.reloads() == reloads

    # Random rules on pairs of hostnames, one with a filter on every rule
    # (the Lua router's alone): the same answers, some of them the module's.
    examples = itertools.count()
    proxied = []

    @settings(
        max_examples=2,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(st.lists(_random_rules(), min_size=4, max_size=4))
    def check(rule_sets: list[list[dict[str, Any]]]) -> None:
        n = next(examples)
        extra = []
        for i, rules in enumerate(rule_sets):
            slow = [{**rule, "filters": [SET_HEADER]} for rule in rules]
            for name, these in ((f"f{n}-{i}", rules), (f"s{n}-{i}", slow)):
                r = route(name, "gw", [f"{name}.rand.example.com"], these)
                r["spec"]["parentRefs"] = [{"name": "gw", "sectionName": "http"}]
                extra.append(r)
        ready = route(f"ready{n}", "gw", [f"ready{n}.example.com"], [to("tea")])
        ferryman.write("routes", *_routes("moved", [*extra, ready]))
        eventually(lambda: by(f"ready{n}.example.com", "/")[0] == "tea", what="the rules live")
        before = fast_path_counts(ferryman)[0]
        for i, uri, headers in itertools.product(range(len(rule_sets)), _URIS, ({}, {"X-H": "1"})):
            pair = (f"f{n}-{i}.rand.example.com", f"s{n}-{i}.rand.example.com")
            answers = [get_at(ADDRESS, http, h, uri, headers=headers) for h in pair]
            seen = [a.served_by if a.status == 200 else a.status for a in answers]
            assert seen[0] == seen[1], (uri, headers, seen, rule_sets[i])
        proxied.append(fast_path_counts(ferryman)[0] - before)

    check()
    assert sum(proxied) > 0, proxied
    assert ferryman.reloads() == reloads
