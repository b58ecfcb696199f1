"""v1 Pod, as far as readiness gates need it: its addresses, gates and conditions.

A pod held back by ferryman's readiness gate is not Ready, so its endpoint is
``ready: false`` and nobody routes to it; yet its gate turns True only once
ferryman routes to it. ``routable_while_gated`` breaks that circle: the pod is
Ready in all but ferryman's gate, so ferryman treats its endpoint as ready.

Pods are written by the API server (or the kubelet): a malformed field makes
the pod count as not routable rather than rejected, since nothing is reported
about pods.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ferryman.resources.meta import InvalidResource
from ferryman.resources.readiness_gate import gate_type

CONTAINERS_READY = "ContainersReady"


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    uid: str
    labels: Mapping[str, str] = field(default_factory=dict)
    # status.podIPs (status.podIP when that is absent), as the API writes them.
    ips: tuple[str, ...] = ()
    # spec.readinessGates' condition types, in order.
    gates: tuple[str, ...] = ()
    # status.conditions: type -> whether its status is "True".
    conditions: Mapping[str, bool] = field(default_factory=dict)
    # metadata.deletionTimestamp is set: the pod is terminating.
    deleting: bool = False


def ips_of(obj: Mapping[str, Any]) -> tuple[str, ...]:
    """The addresses of an unvalidated raw pod (the store's index by address)."""
    status = obj.get("status")
    return _ips(status) if isinstance(status, Mapping) else ()


def _ips(status: Mapping[str, Any]) -> tuple[str, ...]:
    raw = status.get("podIPs")
    ips = [p.get("ip") for p in raw if isinstance(p, Mapping)] if isinstance(raw, list) else []
    if not ips and status.get("podIP"):
        ips = [status.get("podIP")]
    return tuple(c for ip in ips if (c := _canonical(ip)))


def _canonical(ip: object) -> str:
    """As EndpointSlice addresses are kept (``service._address``), so they compare
    equal. An IPv4 address has one spelling (ipaddress refuses leading zeros), so
    only IPv6 is rewritten; anything else matches no endpoint anyway."""
    if not isinstance(ip, str):
        return ""
    if ":" not in ip:
        return ip
    try:
        return str(ipaddress.ip_address(ip))
    except ValueError:
        return ""


def _gates(spec: Mapping[str, Any]) -> tuple[str, ...]:
    raw = spec.get("readinessGates")
    if not isinstance(raw, list):
        return ()
    types = (g.get("conditionType") for g in raw if isinstance(g, Mapping))
    return tuple(t for t in types if isinstance(t, str))


def _conditions(status: Mapping[str, Any]) -> dict[str, bool]:
    raw = status.get("conditions")
    if not isinstance(raw, list):
        return {}
    return {
        c["type"]: c.get("status") == "True"
        for c in raw
        if isinstance(c, Mapping) and isinstance(c.get("type"), str)
    }


def parse_pod(obj: Mapping[str, Any]) -> Pod:
    """Raises InvalidResource only when the metadata has no name.

    Routing parses every pod behind a not-ready endpoint of a Service at each of
    its changes, so this reads only what it needs (``parse_meta`` would check
    timestamps and annotations too, at several times the cost)."""
    md = obj.get("metadata")
    name = md.get("name") if isinstance(md, Mapping) else None
    if not isinstance(name, str) or not name:
        raise InvalidResource(["metadata.name: required"])
    assert isinstance(md, Mapping)
    spec, status = obj.get("spec"), obj.get("status")
    spec = spec if isinstance(spec, Mapping) else {}
    status = status if isinstance(status, Mapping) else {}
    labels = md.get("labels")
    return Pod(
        namespace=_text(md.get("namespace")),
        name=name,
        uid=_text(md.get("uid")),
        # The API admits only strings; a label that is none selects nothing.
        labels={k: v for k, v in labels.items() if isinstance(k, str) and isinstance(v, str)}
        if isinstance(labels, Mapping)
        else {},
        ips=_ips(status),
        gates=_gates(spec),
        conditions=_conditions(status),
        deleting=bool(md.get("deletionTimestamp")),
    )


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _ready_but_for_gate(pod: Pod, gate: str) -> bool:
    """Containers ready, every readiness gate other than ``gate`` True, not
    terminating, and ``gate`` among its gates."""
    return (
        gate in pod.gates
        and not pod.deleting
        and pod.conditions.get(CONTAINERS_READY, False)
        and all(pod.conditions.get(g, False) for g in pod.gates if g != gate)
    )


def gate_pending(pod: Pod, ingress_class: str) -> bool:
    """The pod has ``ingress_class``'s gate and its condition is not True yet."""
    gate = gate_type(ingress_class)
    return gate in pod.gates and not pod.conditions.get(gate, False)


def routable_while_gated(pod: Pod, ingress_class: str) -> bool:
    """Ready in all but ferryman's pending gate: its endpoint is routed to as if
    ready, so that the gate can turn True (the gate flipper's pods)."""
    return gate_pending(pod, ingress_class) and _ready_but_for_gate(pod, gate_type(ingress_class))


def routable_gated(pod: Pod, ingress_class: str) -> bool:
    """What routing asks of a pod behind a ``ready: false`` endpoint: ready in
    all but ferryman's gate, whatever that gate says. Once the gate turns True
    the pod is Ready, but its endpoint says so only when the EndpointSlice
    controller has caught up; meanwhile it stays routed, or a Service whose
    only pod just passed its gate would answer 503 for a moment."""
    return _ready_but_for_gate(pod, gate_type(ingress_class))


def addresses_to_resync(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[str]:
    """The addresses (old and new) whose endpoint sets a pod's event may change:
    none when routing reads nothing that changed (a container restarted, ...)."""
    if old is not None and _parsed(obj) == _parsed(old):
        return []
    return sorted({ip for o in (obj, old) if o is not None for ip in ips_of(o)})


def _parsed(obj: Mapping[str, Any]) -> Pod | None:
    try:
        return parse_pod(obj)
    except InvalidResource:
        return None
