"""Gateway API attachment: the specification's conditions and precedence."""

from __future__ import annotations

from typing import Any

from ferryman.kinds.gateway.parse.gateway_api import (
    Gateway,
    HTTPRoute,
    parse_gateway,
    parse_http_route,
)
from ferryman.kinds.gateway.records.attach import Attachment, attach
from ferryman.resources.reference_grant import ReferenceGrant, parse_reference_grant

LABELS = {"web": {"expose": "yes"}, "gw": {}, "other": {}}
SERVICES = {("web", "app"), ("gw", "app"), ("other", "app")}


def gateway(*listeners: dict[str, Any], namespace: str = "gw") -> Gateway:
    doc = {
        "metadata": {"name": "g", "namespace": namespace},
        "spec": {"gatewayClassName": "ferryman", "listeners": list(listeners)},
    }
    parsed = parse_gateway(doc)
    assert parsed.resource is not None, parsed.message()
    return parsed.resource


def route(
    name: str, namespace: str = "gw", age: str = "2026-01-01T00:00:00Z", **spec: Any
) -> HTTPRoute:
    doc = {
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": age},
        "spec": {"parentRefs": [{"name": "g", "namespace": "gw"}], **spec},
    }
    parsed = parse_http_route(doc)
    assert parsed.resource is not None, parsed.message()
    return parsed.resource


def grant(namespace: str, kind: str, to: str) -> ReferenceGrant:
    doc = {
        "metadata": {"name": "grant", "namespace": namespace},
        "spec": {
            "from": [{"group": "gateway.networking.k8s.io", "kind": kind, "namespace": "gw"}],
            "to": [{"group": "", "kind": to}],
        },
    }
    parsed = parse_reference_grant(doc)
    assert parsed.resource is not None
    return parsed.resource


def run(gws: list[Gateway], routes: list[HTTPRoute], grants: tuple[ReferenceGrant, ...] = (),
        secrets: dict[tuple[str, str], str | None] | None = None) -> Attachment:  # fmt: skip
    known = secrets or {}
    return attach(
        gws,
        routes,
        grants,
        lambda ns, n: known.get((ns, n), "not found"),
        lambda ns: LABELS.get(ns),
        lambda ns, n: (ns, n) in SERVICES,
    )


HTTP = {"name": "http", "port": 80, "protocol": "HTTP"}
BACKEND = {"backendRefs": [{"name": "app", "port": 8080}]}


def conditions(att: Attachment, name: str, namespace: str = "gw") -> dict[str, str]:
    (parent,) = att.routes[(namespace, name)]
    return {c.type: c.reason for c in parent.conditions}


def test_a_route_in_the_gateways_namespace_attaches() -> None:
    att = run([gateway(HTTP)], [route("r", rules=[BACKEND])])
    assert conditions(att, "r") == {"Accepted": "Accepted", "ResolvedRefs": "ResolvedRefs"}
    status = att.gateways[("gw", "g")]
    assert [c.reason for c in status.conditions] == ["Accepted", "Programmed"]
    assert status.listeners[0].attached_routes == 1
    entries = att.table[("gw", "g", "http")][""]
    assert [e.backends for e in entries] == [(("gw", "app", 8080, 1),)]


def test_namespaces_same_all_and_selector() -> None:
    same = run([gateway(HTTP)], [route("r", namespace="web", rules=[BACKEND])])
    assert conditions(same, "r", "web")["Accepted"] == "NotAllowedByListeners"
    assert same.gateways[("gw", "g")].listeners[0].attached_routes == 0
    selector = dict(
        HTTP,
        allowedRoutes={
            "namespaces": {"from": "Selector", "selector": {"matchLabels": {"expose": "yes"}}}
        },
    )
    att = run(
        [gateway(selector)],
        [
            route("r", namespace="web", rules=[BACKEND]),
            route("o", namespace="other", rules=[BACKEND]),
        ],
    )
    assert conditions(att, "r", "web")["Accepted"] == "Accepted"
    assert conditions(att, "o", "other")["Accepted"] == "NotAllowedByListeners"


def test_section_name_and_hostname_intersection() -> None:
    listeners = [dict(HTTP, name="a", hostname="a.test"), dict(HTTP, name="b", hostname="*.b.test")]
    att = run(
        [gateway(*listeners)],
        [
            route("none", parentRefs=[{"name": "g", "sectionName": "c"}], rules=[BACKEND]),
            route("miss", hostnames=["c.test"], rules=[BACKEND]),
            route("wild", hostnames=["x.y.b.test", "a.test"], rules=[BACKEND]),
        ],
    )
    assert conditions(att, "none")["Accepted"] == "NoMatchingParent"
    assert conditions(att, "miss")["Accepted"] == "NoMatchingListenerHostname"
    assert conditions(att, "wild")["Accepted"] == "Accepted"
    assert set(att.table[("gw", "g", "a")]) == {"a.test"}
    assert set(att.table[("gw", "g", "b")]) == {"x.y.b.test"}
    # attachedRoutes counts the Accepted routes whose hostnames meet the
    # listener's: "wild" on both, "miss" (not Accepted) on neither.
    assert [s.attached_routes for s in att.gateways[("gw", "g")].listeners] == [1, 1]


def test_backend_refs_kind_grant_and_existence() -> None:
    rules = [{"backendRefs": [{"name": "app", "namespace": "web", "port": 8080}]}]
    att = run([gateway(HTTP)], [route("r", rules=rules)])
    assert conditions(att, "r") == {"Accepted": "Accepted", "ResolvedRefs": "RefNotPermitted"}
    assert att.table[("gw", "g", "http")][""][0].backends == (("web", None, 8080, 1),)
    granted = run(
        [gateway(HTTP)], [route("r", rules=rules)], (grant("web", "HTTPRoute", "Service"),)
    )
    assert conditions(granted, "r")["ResolvedRefs"] == "ResolvedRefs"
    missing = run(
        [gateway(HTTP)], [route("r", rules=[{"backendRefs": [{"name": "gone", "port": 1}]}])]
    )
    assert conditions(missing, "r")["ResolvedRefs"] == "BackendNotFound"
    kind = run(
        [gateway(HTTP)],
        [route("r", rules=[{"backendRefs": [{"name": "x", "kind": "Pod", "port": 1}]}])],
    )
    assert conditions(kind, "r")["ResolvedRefs"] == "InvalidKind"


def test_listener_certificates_protocols_and_conflicts() -> None:
    https = {"name": "https", "port": 443, "protocol": "HTTPS",
             "tls": {"certificateRefs": [{"name": "cert", "namespace": "web"}]}}  # fmt: skip
    att = run([gateway(HTTP, https)], [], secrets={("web", "cert"): None})
    https_status = att.gateways[("gw", "g")].listeners[1]
    assert {c.type: c.reason for c in https_status.conditions}["ResolvedRefs"] == "RefNotPermitted"
    assert att.gateways[("gw", "g")].conditions[0].reason == "ListenersNotValid"
    ok = run(
        [gateway(HTTP, https)], [], (grant("web", "Gateway", "Secret"),), {("web", "cert"): None}
    )
    assert ok.gateways[("gw", "g")].listeners[1].usable
    udp = run([gateway(HTTP, {"name": "u", "port": 53, "protocol": "UDP"})], [])
    assert {c.type: c.reason for c in udp.gateways[("gw", "g")].listeners[1].conditions}[
        "Accepted"
    ] == "UnsupportedProtocol"
    clash = run(
        [
            gateway(
                HTTP,
                {
                    "name": "h2",
                    "port": 80,
                    "protocol": "HTTPS",
                    "tls": {"certificateRefs": [{"name": "c"}]},
                },
            )
        ],
        [],
    )
    reasons = {c.type: c.reason for c in clash.gateways[("gw", "g")].listeners[0].conditions}
    assert reasons["Conflicted"] == "ProtocolConflict"


def test_precedence_across_routes() -> None:
    def rule(path_type: str, value: str, **extra: Any) -> dict[str, Any]:
        return {"matches": [{"path": {"type": path_type, "value": value}, **extra}], **BACKEND}

    routes = [
        route("young", age="2026-02-01T00:00:00Z", rules=[rule("PathPrefix", "/a")]),
        route("old", age="2026-01-01T00:00:00Z", rules=[rule("PathPrefix", "/a")]),
        route("long", rules=[rule("PathPrefix", "/a/b")]),
        route("exact", rules=[rule("Exact", "/a")]),
        route(
            "header",
            age="2026-03-01T00:00:00Z",
            rules=[rule("PathPrefix", "/a", headers=[{"name": "x", "value": "1"}])],
        ),
        route("method", age="2026-03-01T00:00:00Z", rules=[rule("PathPrefix", "/a", method="GET")]),
    ]
    att = run([gateway(HTTP)], routes)
    order = [e.route for e in att.table[("gw", "g", "http")][""]]
    assert order == ["gw/exact", "gw/long", "gw/method", "gw/header", "gw/old", "gw/young"]
