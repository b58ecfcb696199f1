"""``vs_delegation.resolve``: which VirtualServerRoutes a VirtualServer serves,
and NIC's warnings about the others (internal/k8s/configuration.go)."""

from __future__ import annotations

from typing import Any

from ferryman.kinds.virtualserver.parse.virtualserver import VirtualServer, parse_virtual_server
from ferryman.kinds.virtualserver.records.delegation import resolve
from ferryman.kinds.virtualserver.records.virtualserver import routed, vs_records
from testkit.vs_delegation import Reads, _vsr


def _vs(*routes: dict[str, Any]) -> VirtualServer:
    vs = parse_virtual_server(
        {
            "apiVersion": "k8s.nginx.org/v1",
            "kind": "VirtualServer",
            "metadata": {"name": "cafe", "namespace": "default"},
            "spec": {"host": "cafe.test", "routes": list(routes)},
        }
    ).resource
    assert vs is not None
    return vs


def _names(vs: VirtualServer, reads: Reads) -> tuple[list[str], tuple[str, ...]]:
    out = resolve(vs, reads, "ferryman")
    return [f"{d.vsr.meta.namespace}/{d.vsr.meta.name}" for d in out.routes], out.warnings


def test_another_class_is_as_missing() -> None:
    vs = _vs({"path": "/a", "route": "a"})
    assert _names(vs, Reads(_vsr("a", "/a", ingressClassName="nginx"))) == (
        [],
        ("VirtualServerRoute default/a doesn't exist or invalid",),
    )
    assert _names(vs, Reads(_vsr("a", "/a", ingressClassName="ferryman")))[0] == ["default/a"]


def test_one_route_twice_is_a_duplicate() -> None:
    vs = _vs(
        {"path": "/a", "route": "a"}, {"path": "/b", "routeSelector": {"matchLabels": {"x": "1"}}}
    )
    reads = Reads(_vsr("a", "/a", labels={"x": "1"}))
    # Through the selector it fails the check first ("/a" is not under "/b").
    assert _names(vs, reads) == (
        ["default/a"],
        (
            "VirtualServerRoute default/a is invalid: spec.subroutes[0].path: Invalid value: "
            "\"/a\": must start with '/b'",
        ),
    )
    vs = _vs(
        {"path": "/a", "route": "a"}, {"path": "/", "routeSelector": {"matchLabels": {"x": "1"}}}
    )
    assert _names(vs, reads) == (
        ["default/a"],
        ("VS default/cafe has duplicate VirtualServerRoutes default/a",),
    )


def test_conflicting_subroutes_drop_the_later_route() -> None:
    vs = _vs(
        {"path": "/", "routeSelector": {"matchLabels": {"x": "1"}}},
        {"path": "/own", "action": {"return": {"body": "x"}}},
    )
    reads = Reads(
        _vsr("a", "/a", labels={"x": "1"}, namespace="one"),
        _vsr("b", "/a", labels={"x": "1"}, namespace="two"),
        _vsr("c", "/own", labels={"x": "1"}, namespace="two"),
    )
    assert _names(vs, reads) == (
        ["one/a"],
        (
            "path /a has conflicting subroutes on two/b and one/a",
            "path /own of VirtualServerRoute two/c is a route of the VirtualServer too (ferryman)",
        ),
    )


def test_a_subroute_on_a_prefix_the_virtualserver_has_with_caret_tilde_is_dropped() -> None:
    # /b/b and ^~/b/b are one NGINX location: the pair is a duplicate, as
    # /b/b twice is (found by test_vsr_router_property.py: the router served
    # the subroute where the VirtualServer's ^~ route should answer).
    vs = _vs(
        {"path": "/b", "route": "pre"}, {"path": "^~/b/b", "action": {"return": {"body": "x"}}}
    )
    assert _names(vs, Reads(_vsr("pre", "/b/b"))) == (
        [],
        (
            "path /b/b of VirtualServerRoute default/pre is a route of the VirtualServer "
            "too (ferryman)",
        ),
    )


def test_regex_routes_to_one_route_are_checked_together_after_the_others() -> None:
    vs = _vs(
        {"path": "~ ^/r1", "route": "rx"},
        {"path": "/p", "route": "p"},
        {"path": "~ ^/r2", "route": "rx"},
    )
    reads = Reads(_vsr("rx", "~^/r1", "~ ^/r2"), _vsr("p", "/p"))
    out = resolve(vs, reads, "ferryman")
    assert out.warnings == ()
    # The locations: the VS's own (none), then p's, then rx's, NIC's order.
    assert [str(r.path) for r in routed(vs, out.routes)] == ["/p", "~^/r1", "~^/r2"]


def test_subroutes_get_their_own_upstreams_warnings_and_the_routes_error_pages() -> None:
    pages = [{"codes": [502], "return": {"code": 200, "body": "down"}}]
    vs = _vs({"path": "/a", "route": "team/a", "errorPages": pages})
    doc = _vsr("a", "/a", "/a/b", namespace="team")
    doc["spec"]["upstreams"][0]["client-body-buffer-size"] = "16k"
    out = resolve(vs, Reads(doc), "ferryman")
    assert [len(r.error_pages) for r in routed(vs, out.routes)] == [1, 1]
    records = vs_records(vs, None, delegated=out.routes)
    assert records.backends == {"team/svc:80"}  # the VSR's namespace
    assert records.warnings == ()
    assert dict(records.routes) == {
        out.routes[0].ref: (
            "spec.upstreams[0].client-body-buffer-size: "
            "client_body_buffer_size takes no variable; ignored",
        )
    }
