"""NGINX routes a VirtualServer with VirtualServerRoute delegations exactly as the
reference predicts: ``vs_delegation.resolve`` (NIC's rules), then
``virtualserver.routed`` (the VS's own routes, then the subroutes) and
``vs_routes.find_location`` (NGINX's location precedence).

Hypothesis draws a VirtualServer's own routes (every path form, as in
test_vs_router_property.py), a prefix delegation and an exact delegation each to
a VirtualServerRoute, and two regex routes naming one VirtualServerRoute; the
subroutes of the prefix one lie under its path or not (then NIC's check drops it),
and may repeat a VS path (then ferryman drops it). Each VirtualServerRoute names
its upstreams differently from the VS, so an answer also shows that a subroute's
upstream is its own resource's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferryman.kinds.virtualserver.parse.virtualserver import parse_virtual_server
from ferryman.kinds.virtualserver.parse.virtualserverroute import (
    VirtualServerRoute,
    parse_virtual_server_route,
)
from ferryman.kinds.virtualserver.records.delegation import resolve
from ferryman.kinds.virtualserver.records.locations import find_location
from ferryman.kinds.virtualserver.records.virtualserver import location, routed
from ferryman.resources.nic_fields import Parsed
from testkit import router_kit as kit
from testkit.harness import Backends, Ferryman
from testkit.vs_router import (
    MARKER_SERVICE,
    REGEXES,
    SERVICES,
    _plain,
    _requests,
    _route,
)

HOST = "vs-router.example.com"


class _Reads:
    """The reads ``resolve`` makes, answered from the drawn manifests."""

    def __init__(self, docs: list[dict[str, Any]]) -> None:
        self.parsed = {d["metadata"]["name"]: parse_virtual_server_route(d) for d in docs}

    def route(self, namespace: str, name: str) -> Parsed[VirtualServerRoute] | None:
        return self.parsed.get(name)

    def selected_routes(self, labels: Mapping[str, str]) -> list[VirtualServerRoute]:
        return []


def _vsr(name: str, subroutes: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServerRoute",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "host": HOST,
            # Named unlike the VS's: a subroute can only mean its own.
            "upstreams": [{"name": f"own-{s}", "service": s, "port": 80} for s in SERVICES],
            "subroutes": [{"path": p, "action": {"pass": f"own-{s}"}} for p, s in subroutes],
        },
    }


@st.composite
def _example(draw: st.DrawFn) -> list[dict[str, Any]]:
    own = draw(
        st.lists(_route(), min_size=3, max_size=8, unique_by=lambda r: r[0].removeprefix("^~"))
    )
    taken = {p.removeprefix("^~") for p, _ in own}
    prefix = draw(_plain.filter(lambda p: p not in taken and len(p) > 1))
    exact = "=" + draw(_plain.filter(lambda p: "=" + p not in taken))
    regexes = draw(
        st.lists(
            st.sampled_from([r for r in REGEXES if "~" + r not in taken]),
            min_size=1,
            max_size=2,
            unique=True,
        )
    )
    service = st.sampled_from(SERVICES)
    under = draw(
        st.lists(
            st.tuples(
                st.one_of(
                    _plain.map(lambda p: prefix + p.lstrip("/")),
                    _plain.map(lambda p: prefix + p),
                    st.just(prefix),
                    _plain,  # maybe not under the prefix: NIC's check fails it
                ),
                service,
            ),
            min_size=1,
            max_size=4,
            unique_by=lambda r: r[0],
        )
    )
    routes: list[dict[str, Any]] = [{"path": p, "action": {"pass": s}} for p, s in own]
    routes.insert(draw(st.integers(0, len(routes))), {"path": prefix, "route": "pre"})
    routes.insert(draw(st.integers(0, len(routes))), {"path": exact, "route": "ex"})
    for r in regexes:
        routes.insert(draw(st.integers(0, len(routes))), {"path": "~" + r, "route": "rx"})
    vs = {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": {"name": "router", "namespace": "default"},
        "spec": {
            "host": HOST,
            "upstreams": [
                {"name": s, "service": s, "port": 80} for s in (*SERVICES, MARKER_SERVICE)
            ],
            "routes": routes,
        },
    }
    return [
        vs,
        _vsr("pre", under),
        _vsr("ex", [(exact, draw(service))]),
        _vsr("rx", [("~" + r, draw(service)) for r in regexes]),
    ]


def _with_marker(docs: list[dict[str, Any]], marker: str) -> list[dict[str, Any]]:
    vs = docs[0]
    marked = {"path": f"={marker}", "action": {"pass": MARKER_SERVICE}}
    spec = {**vs["spec"], "routes": [*vs["spec"]["routes"], marked]}
    return [{**vs, "spec": spec}, *docs[1:]]


def predicted(docs: list[dict[str, Any]], request: str) -> str:
    vs = parse_virtual_server(docs[0]).resource
    assert vs is not None
    delegations = resolve(vs, _Reads(docs[1:]), "ferryman")
    routes = routed(vs, delegations.routes)
    found = find_location([location(r) for r in routes], re.sub("/+", "/", request))
    if found is None:
        return "404"
    if found.redirect:
        return "301"
    action = routes[found.index].action
    assert action is not None
    return str(getattr(action, "upstream", "")).removeprefix("own-")


@pytest.fixture
def router(ferryman: Ferryman, backends: Backends) -> Iterator[tuple[Ferryman, kit.HostClient]]:
    client = kit.HostClient(ferryman, HOST)
    yield from kit.serve(ferryman, backends, (*SERVICES, MARKER_SERVICE), client)


@kit.examples(15)
@given(docs=_example(), requests=_requests)
def test_delegated_routes_like_the_reference(
    router: tuple[Ferryman, kit.HostClient], docs: list[dict[str, Any]], requests: list[str]
) -> None:
    ferryman, client = router
    marker = kit.new_marker()
    docs = _with_marker(docs, marker)
    assert parse_virtual_server(docs[0]).problems == ()
    ferryman.write("vs", *docs)
    kit.await_marker(client, marker, MARKER_SERVICE)
    paths = [
        str(r["path"])
        for d in docs
        for r in d["spec"].get("routes", d["spec"].get("subroutes", []))
    ]
    near = [
        p.lstrip("=^~ ") + s for p in paths if not p.startswith("~") for s in ("", "/", "/x", "x")
    ]
    checked = [r for r in dict.fromkeys([*near, *requests]) if r.startswith("/")][:80]
    kit.check_answers(client, checked, lambda r: predicted(docs, r), f"docs={docs}")
