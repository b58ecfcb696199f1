"""Gateway API ListenerSets: which attach to a Gateway, how their listeners
merge into its own (conflicts resolved in the Gateway's favour, then the
oldest ListenerSet's), how routes attach to them, and the statuses that
result (ListenerSet, Gateway, route parents)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from ferryman.kinds.gateway.parse.gateway_api import (
    Gateway,
    HTTPRoute,
    parse_gateway,
    parse_http_route,
)
from ferryman.kinds.gateway.parse.listener_set import ListenerSet, parse_listener_set
from ferryman.kinds.gateway.records.attach import Attachment, attach
from ferryman.kinds.gateway.records.listener_sets import Merged, SetStatus, merge, split
from ferryman.kinds.gateway.records.listeners import listener_status
from ferryman.kinds.gateway.records.status import listener_set_status, with_listener_sets
from ferryman.kinds.gateway.translate.listener_sets import publish
from ferryman.resources.meta import ObjectRef
from ferryman.resources.reference_grant import ReferenceGrant, parse_reference_grant

LABELS: dict[str, dict[str, str]] = {"gw": {}, "team": {"tenant": "yes"}, "other": {}}
SERVICES = {("gw", "app"), ("team", "app")}
SECRETS = {("certs", "tls"): None}


def gateway(*listeners: dict[str, Any], allowed: dict[str, Any] | None = None) -> Gateway:
    spec: dict[str, Any] = {"gatewayClassName": "ferryman", "listeners": list(listeners)}
    if allowed is not None:
        spec["allowedListeners"] = {"namespaces": allowed}
    parsed = parse_gateway({"metadata": {"name": "g", "namespace": "gw"}, "spec": spec})
    assert parsed.resource is not None, parsed.message()
    return parsed.resource


def listener_set(
    name: str, *listeners: dict[str, Any], namespace: str = "gw", age: str = "2026-01-01T00:00:00Z"
) -> ListenerSet:
    doc = {
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": age},
        "spec": {"parentRef": {"name": "g", "namespace": "gw"}, "listeners": list(listeners)},
    }
    parsed = parse_listener_set(doc)
    assert parsed.resource is not None, parsed.message()
    return parsed.resource


def route(name: str, *parents: dict[str, Any], namespace: str = "gw") -> HTTPRoute:
    doc = {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "parentRefs": list(parents),
            "rules": [{"backendRefs": [{"name": "app", "port": 8080}]}],
        },
    }
    parsed = parse_http_route(doc)
    assert parsed.resource is not None, parsed.message()
    return parsed.resource


def grant(kind: str, namespace: str) -> ReferenceGrant:
    doc = {
        "metadata": {"name": "grant", "namespace": "certs"},
        "spec": {
            "from": [{"group": "gateway.networking.k8s.io", "kind": kind, "namespace": namespace}],
            "to": [{"group": "", "kind": "Secret"}],
        },
    }
    parsed = parse_reference_grant(doc)
    assert parsed.resource is not None
    return parsed.resource


def secret(namespace: str, name: str) -> str | None:
    return SECRETS.get((namespace, name), "not found")


def run(
    gw: Gateway,
    sets: list[ListenerSet],
    routes: Sequence[HTTPRoute] = (),
    grants: tuple[ReferenceGrant, ...] = (),
) -> tuple[Merged, Attachment, dict[tuple[str, str], SetStatus], dict[tuple[str, str], int]]:
    merged = merge([gw], sets, LABELS.get)
    att = attach(
        merged.gateways, routes, grants, secret, LABELS.get,
        lambda ns, n: (ns, n) in SERVICES, listener_sets=merged.parents,
    )  # fmt: skip
    alone = partial(listener_status, grants=list(grants), secret=secret, port_problem=None)
    statuses, attached = split(merged, att.gateways, alone)
    return merged, att, statuses, attached


def http(name: str, host: str, port: int = 80, **more: Any) -> dict[str, Any]:
    return {"name": name, "port": port, "protocol": "HTTP", "hostname": host, **more}


def accepted(s: SetStatus) -> tuple[bool, str, bool, str]:
    return (s.accepted.status, s.accepted.reason, s.programmed.status, s.programmed.reason)


def reasons(s: SetStatus, listener: str) -> dict[str, tuple[bool, str]]:
    (entry,) = [li for li in s.listeners if li.name == listener]
    return {c.type: (c.status, c.reason) for c in entry.conditions}


def parent_reasons(att: Attachment, name: str, namespace: str = "gw") -> list[tuple[str, str]]:
    return [
        (p.parent.kind, next(c.reason for c in p.conditions if c.type == "Accepted"))
        for p in att.routes[(namespace, name)]
    ]


def test_a_gateway_admits_no_listener_set_by_default() -> None:
    _, att, statuses, attached = run(
        gateway(http("own", "a.com")), [listener_set("s", http("l", "b.com"))]
    )
    assert accepted(statuses[("gw", "s")]) == (False, "NotAllowed", False, "NotAllowed")
    assert [s.name for s in att.gateways[("gw", "g")].listeners] == ["own"]
    assert attached == {}


def test_same_admits_the_gateways_namespace_only_and_selector_by_labels() -> None:
    sets = [listener_set("here", http("l", "b.com")),
            listener_set("there", http("l", "c.com"), namespace="team")]  # fmt: skip
    _, _, statuses, attached = run(gateway(http("own", "a.com"), allowed={"from": "Same"}), sets)
    assert accepted(statuses[("gw", "here")]) == (True, "Accepted", True, "Programmed")
    assert accepted(statuses[("team", "there")])[:2] == (False, "NotAllowed")
    assert attached == {("gw", "g"): 1}
    selector = {"from": "Selector", "selector": {"matchLabels": {"tenant": "yes"}}}
    _, _, statuses, attached = run(gateway(http("own", "a.com"), allowed=selector), sets)
    assert accepted(statuses[("gw", "here")])[:2] == (False, "NotAllowed")
    assert accepted(statuses[("team", "there")])[:2] == (True, "Accepted")


def test_conflicts_go_to_the_gateway_then_the_oldest_listener_set() -> None:
    gw = gateway(http("own", "a.com"), allowed={"from": "All"})
    older = listener_set(
        "older", http("own", "a.com"), http("x", "x.com"), age="2026-01-01T00:00:00Z"
    )
    newer = listener_set("newer", http("y", "x.com"), age="2026-01-02T00:00:00Z")
    tls = {"name": "t", "port": 80, "protocol": "TLS", "hostname": "t.com",
           "tls": {"mode": "Passthrough"}}  # fmt: skip
    proto = listener_set("proto", tls, age="2026-01-03T00:00:00Z")
    merged, att, statuses, attached = run(gw, [newer, proto, older])
    conflicted = {"Accepted": (False, "HostnameConflict"), "ResolvedRefs": (True, "ResolvedRefs"),
                  "Conflicted": (True, "HostnameConflict"),
                  "Programmed": (False, "HostnameConflict")}  # fmt: skip
    assert reasons(statuses[("gw", "older")], "own") == conflicted
    assert reasons(statuses[("gw", "older")], "x")["Programmed"] == (True, "Programmed")
    assert accepted(statuses[("gw", "older")]) == (True, "Accepted", True, "Programmed")
    assert reasons(statuses[("gw", "newer")], "y") == conflicted
    assert accepted(statuses[("gw", "newer")]) == (False, "ListenersNotValid") * 2
    assert reasons(statuses[("gw", "proto")], "t")["Conflicted"] == (True, "ProtocolConflict")
    # The Gateway's own listener keeps its port and hostname, unconflicted.
    own = {c.type: c.reason for c in att.gateways[("gw", "g")].listeners[0].conditions}
    assert own["Conflicted"] == "NoConflicts"
    assert attached == {("gw", "g"): 1}
    assert [lst.name for lst in merged.gateways[0].listeners] == ["own", "gw/older/x"]


def test_routes_attach_by_their_parent_kind_and_section() -> None:
    gw = gateway(http("own", "a.com"), allowed={"from": "All"})
    ls = listener_set("s", http("one", "one.com"), http("two", "two.com"), namespace="team")
    routes = [
        route("to-gateway", {"name": "g", "namespace": "gw"}),
        route("to-set", {"kind": "ListenerSet", "name": "s"}, namespace="team"),
        route("to-section", {"kind": "ListenerSet", "name": "s", "sectionName": "two"},
              namespace="team"),
        # A ListenerSet's listener is not the Gateway's: no such section there.
        route("wrong-parent", {"name": "g", "namespace": "gw", "sectionName": "one"}),
        # allowedRoutes Same on a ListenerSet's listener is the ListenerSet's namespace.
        route("from-gw-ns", {"kind": "ListenerSet", "name": "s", "namespace": "team"}),
    ]  # fmt: skip
    _, att, statuses, _ = run(gw, [ls], routes)
    assert parent_reasons(att, "to-gateway") == [("Gateway", "Accepted")]
    assert parent_reasons(att, "to-set", "team") == [("ListenerSet", "Accepted")]
    assert parent_reasons(att, "to-section", "team") == [("ListenerSet", "Accepted")]
    assert parent_reasons(att, "wrong-parent") == [("Gateway", "NoMatchingParent")]
    assert parent_reasons(att, "from-gw-ns") == [("ListenerSet", "NotAllowedByListeners")]
    counts = {li.name: li.attached_routes for li in statuses[("team", "s")].listeners}
    assert counts == {"one": 1, "two": 2}
    tables = {
        k[2]: sorted({e.route for es in t.values() for e in es}) for k, t in att.table.items()
    }
    assert tables == {"own": ["gw/to-gateway"], "team/s/one": ["team/to-set"],
                      "team/s/two": ["team/to-section", "team/to-set"]}  # fmt: skip


def test_certificate_refs_are_granted_to_the_listener_set() -> None:
    https = {"name": "s", "port": 443, "protocol": "HTTPS", "hostname": "s.com",
             "tls": {"certificateRefs": [{"name": "tls", "namespace": "certs"}]}}  # fmt: skip
    gw = gateway(http("own", "a.com"), allowed={"from": "All"})
    sets = [listener_set("s", https, namespace="team")]
    _, _, statuses, _ = run(gw, sets, grants=(grant("Gateway", "team"),))
    assert reasons(statuses[("team", "s")], "s")["ResolvedRefs"] == (False, "RefNotPermitted")
    assert accepted(statuses[("team", "s")])[:2] == (False, "ListenersNotValid")
    _, _, statuses, _ = run(gw, sets, grants=(grant("ListenerSet", "team"),))
    assert reasons(statuses[("team", "s")], "s")["ResolvedRefs"] == (True, "ResolvedRefs")


def test_the_statuses_as_written() -> None:
    gw = gateway(http("own", "a.com"), allowed={"from": "Same"})
    _, _, statuses, attached = run(gw, [listener_set("s", http("l", "b.com"))])
    body = listener_set_status(statuses[("gw", "s")], 3)
    assert [(c["type"], c["status"], c["observedGeneration"]) for c in body["conditions"]] == [
        ("Accepted", "True", 3),
        ("Programmed", "True", 3),
    ]
    assert [li["name"] for li in body["listeners"]] == ["l"]
    gateway_body = {"listeners": [{"name": "own"}, {"name": "gw/s/l"}], "conditions": []}
    assert with_listener_sets(gateway_body, attached[("gw", "g")]) == {
        "listeners": [{"name": "own"}],
        "conditions": [],
        "attachedListenerSets": 1,
    }


def test_a_listener_set_of_a_gateway_not_accepted_or_not_programmed_is_not_either() -> None:
    bad = {"name": "own", "port": 80, "protocol": "UDP"}  # UnsupportedProtocol: none valid
    _, _, statuses, _ = run(
        gateway(bad, allowed={"from": "Same"}), [listener_set("s", http("l", "b.com"))]
    )
    assert accepted(statuses[("gw", "s")]) == (False, "ParentNotAccepted") * 2
    gw = gateway(http("own", "a.com"), allowed={"from": "Same"})
    merged, _, statuses, attached = run(gw, [listener_set("s", http("l", "b.com"))])
    programmed = {"type": "Programmed", "status": "False", "message": "no address"}
    no_address = {"conditions": [{"type": "Accepted", "status": "True"}, programmed]}
    bodies: dict[ObjectRef, Mapping[str, Any]] = {ObjectRef("Gateway", "gw", "g"): no_address}
    publish(merged, statuses, attached, bodies)
    conditions = bodies[ObjectRef("ListenerSet", "gw", "s")]["conditions"]
    assert [(c["type"], c["status"], c["reason"]) for c in conditions] == [
        ("Accepted", "True", "Accepted"),
        ("Programmed", "False", "Pending"),
    ]
    assert bodies[ObjectRef("Gateway", "gw", "g")]["attachedListenerSets"] == 1
