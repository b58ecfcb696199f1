"""NGINX routes VirtualServer paths exactly as
``ferryman.kinds.virtualserver.records.locations.find_location`` predicts:
NGINX's location precedence (exact, longest prefix, ``^~``,
regexes in order, auto_redirect), done per request by ngx_http_ferryman_module
(``vs_fast``) or, without it, in Lua.

Hypothesis draws a VirtualServer (one host, 6-15 routes of every path form over a
tiny alphabet, so that ties, prefix relations and regex overlaps are frequent)
and request paths over the same alphabet; every answer (the backend's name, 404
or 301) must be the reference's. One ferryman serves every example: each one
rewrites the VirtualServer and waits for a marker route only it has.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferryman.kinds.virtualserver.parse.virtualserver import parse_virtual_server
from ferryman.kinds.virtualserver.records.locations import find_location
from ferryman.kinds.virtualserver.records.virtualserver import location, routed
from testkit import router_kit as kit
from testkit.harness import (
    Backends,
    Ferryman,
    fast_path_counts,
)
from testkit.vs_router import MARKER_SERVICE, SERVICES, _requests, _route

HOST = "vs-router.example.com"


# Unique as locations ("/a" and "^~/a" are one location to NGINX).
_routes = st.lists(_route(), min_size=6, max_size=15, unique_by=lambda r: r[0].removeprefix("^~"))


def manifest(routes: list[tuple[str, str]], marker: str) -> dict[str, Any]:
    entries = [{"path": p, "action": {"pass": svc}} for p, svc in routes]
    entries.append({"path": f"={marker}", "action": {"pass": MARKER_SERVICE}})
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": {"name": "router", "namespace": "default"},
        "spec": {
            "host": HOST,
            "upstreams": [
                {"name": s, "service": s, "port": 80} for s in (*SERVICES, MARKER_SERVICE)
            ],
            "routes": entries,
        },
    }


def predicted(obj: dict[str, Any], request: str) -> str:
    vs = parse_virtual_server(obj).resource
    assert vs is not None
    routes = routed(vs)
    # NGINX routes on the URI with slashes merged.
    found = find_location([location(r) for r in routes], re.sub("/+", "/", request))
    if found is None:
        return "404"
    if found.redirect:
        return "301"
    action = routes[found.index].action
    assert action is not None
    return str(getattr(action, "upstream", ""))


@pytest.fixture
def router(
    either_fast_path: Ferryman, backends: Backends
) -> Iterator[tuple[Ferryman, kit.HostClient]]:
    either_fast_path.write("vs", manifest([("/", "a")], "/marker-start"))
    client = kit.HostClient(either_fast_path, HOST)
    yield from kit.serve(either_fast_path, backends, (*SERVICES, MARKER_SERVICE), client)


@kit.examples(15)
@given(routes=_routes, requests=_requests)
def test_virtual_server_routes_like_find_location(
    router: tuple[Ferryman, kit.HostClient], routes: list[tuple[str, str]], requests: list[str]
) -> None:
    ferryman, client = router
    marker = kit.new_marker()
    obj = manifest(routes, marker)
    assert parse_virtual_server(obj).problems == ()
    ferryman.write("vs", obj)
    kit.await_marker(client, marker, MARKER_SERVICE)

    near = [
        p.lstrip("=^~ ") + s
        for p, _ in routes
        if not p.startswith("~")
        for s in ("", "/", "/x", "x")
    ]
    checked = [r for r in dict.fromkeys([*near, *requests]) if r.startswith("/")][:80]
    module = "--nginx-modules-dir" not in ferryman.extra_args
    before = fast_path_counts(ferryman) if module else (0.0, 0.0)
    answers = kit.check_answers(client, checked, lambda r: predicted(obj, r), f"routes={routes}")
    if module:
        # The module proxied every request a route passes (vs_fast: these routes
        # are all its own) and handed the 404s and 301s to the slow path.
        proxied = sum(1 for _, want, _ in answers if want not in ("404", "301"))
        after = fast_path_counts(ferryman)
        assert (after[0] - before[0], after[1] - before[1]) == (
            proxied,
            len(answers) - proxied,
        )
