"""Gateway API statuses as the API holds them (pure: ``gateway_attach``'s
conditions in, ``status`` bodies out).

Every condition carries the object's generation as ``observedGeneration``:
clients (the conformance suite among them) take a condition with an older
one as not yet reported. ``lastTransitionTime`` is the writer's
(report/kubernetes.py), which keeps it while a condition's status stays.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ferryman.kinds.gateway.parse.gateway_api import GROUP, Gateway
from ferryman.kinds.gateway.records.addresses import NoAddress
from ferryman.kinds.gateway.records.attach import ParentStatus
from ferryman.kinds.gateway.records.listener_sets import SetStatus
from ferryman.kinds.gateway.records.listeners import Condition, GatewayStatus, ListenerStatus

# What ferryman serves of the specification (GatewayClass
# status.supportedFeatures, which the conformance suite reads): the core of
# GATEWAY-HTTP, GATEWAY-TLS and GATEWAY-GRPC and the extended features the
# route engine implements.
SUPPORTED_FEATURES = (
    "BackendTLSPolicy",
    "BackendTLSPolicySANValidation",
    "Gateway",
    "HTTPRoute",
    "ReferenceGrant",
    "TLSRoute",
    "TLSRouteModeTerminate",
    "GRPCRoute",
    "GRPCRouteNamedRouteRule",
    "GatewayAddressEmpty",
    "GatewayBackendClientCertificate",
    "GatewayFrontendClientCertificateValidation",
    "GatewayFrontendClientCertificateValidationInsecureFallback",
    "GatewayHTTPListenerIsolation",
    "GatewayHTTPSListenerDetectMisdirectedRequests",
    "GatewayPort8080",
    "GatewayStaticAddresses",
    "HTTPRoute303RedirectStatusCode",
    "HTTPRoute307RedirectStatusCode",
    "HTTPRoute308RedirectStatusCode",
    "HTTPRouteBackendProtocolH2C",
    "HTTPRouteBackendProtocolWebSocket",
    "HTTPRouteBackendRequestHeaderModification",
    "HTTPRouteBackendTimeout",
    "HTTPRouteCORS",
    "HTTPRouteDestinationPortMatching",
    "HTTPRouteHostRewrite",
    "HTTPRouteMethodMatching",
    "HTTPRouteNamedRouteRule",
    "HTTPRouteParentRefPort",
    "HTTPRoutePathRedirect",
    "HTTPRoutePathRewrite",
    "HTTPRoutePortRedirect",
    "HTTPRouteQueryParamMatching",
    "HTTPRouteRequestMirror",
    "HTTPRouteRequestMultipleMirrors",
    "HTTPRouteRequestPercentageMirror",
    "HTTPRouteRequestTimeout",
    "HTTPRouteResponseHeaderModification",
    "HTTPRouteSchemeRedirect",
    "ListenerSet",
)


def conditions(items: Iterable[Condition], generation: int) -> list[dict[str, Any]]:
    return [
        {
            "type": c.type,
            "status": "True" if c.status else "False",
            "reason": c.reason,
            "message": c.message or c.reason,
            "observedGeneration": generation,
        }
        for c in items
    ]


def gateway_class_status(generation: int, accepted: bool, message: str = "") -> dict[str, Any]:
    if accepted:
        condition = Condition("Accepted", True, "Accepted", "served by ferryman")
    else:
        condition = Condition("Accepted", False, "InvalidParameters", message)
    return {
        "conditions": conditions([condition], generation),
        "supportedFeatures": [{"name": f} for f in sorted(SUPPORTED_FEATURES)],
    }


def gateway_status(status: GatewayStatus, generation: int, address: str | None) -> dict[str, Any]:
    return {
        "addresses": [{"type": "IPAddress", "value": address}] if address else [],
        "conditions": conditions(status.conditions, generation),
        "listeners": _listeners(status.listeners, generation),
    }


def _listeners(listeners: Iterable[ListenerStatus], generation: int) -> list[dict[str, Any]]:
    return [
        {
            "name": s.name,
            "supportedKinds": [{"group": g, "kind": k} for g, k in s.supported_kinds],
            "attachedRoutes": s.attached_routes,
            "conditions": conditions(s.conditions, generation),
        }
        for s in listeners
    ]


def listener_set_status(status: SetStatus, generation: int) -> dict[str, Any]:
    return {
        "conditions": conditions((status.accepted, status.programmed), generation),
        "listeners": _listeners(status.listeners, generation),
    }


def with_listener_sets(body: dict[str, Any], attached: int | None) -> dict[str, Any]:
    """A Gateway's status without its ListenerSets' listeners (merged ones are
    named ``namespace/name/listener``: records/listener_sets.py), with
    ``attachedListenerSets`` when it admits ListenerSets (``attached``)."""
    listeners = [li for li in body.get("listeners", ()) if "/" not in li["name"]]
    out = {**body, "listeners": listeners}
    if attached is not None:
        out["attachedListenerSets"] = attached
    return out


def invalid_gateway_status(
    generation: int, message: str, reason: str = "Invalid"
) -> dict[str, Any]:
    """A Gateway the API server would not have taken (manifests mode), or
    one whose parameters are unusable (``InvalidParameters``)."""
    return {
        "conditions": conditions(
            [
                Condition("Accepted", False, reason, message),
                Condition("Programmed", False, "Invalid", message),
            ],
            generation,
        ),
    }


def parameters_problem(gw: Gateway) -> str | None:
    """Why ``gw`` is not accepted for its ``infrastructure.parametersRef``:
    ferryman has no parameters kind for Gateways (their infrastructure is the
    controller's own NGINX), so any reference is one it cannot resolve."""
    p = gw.parameters
    if p is None:
        return None
    what = f"{p.group}/{p.kind}" if p.group else p.kind
    return (
        f"infrastructure.parametersRef {what} {p.name}: ferryman serves every Gateway "
        "from its own NGINX and takes no parameters for one"
    )


def route_parents(
    parents: Iterable[ParentStatus], route_namespace: str, generation: int, controller: str
) -> dict[str, Any]:
    out = []
    for p in parents:
        ref: dict[str, Any] = {
            "group": p.parent.group or GROUP,
            "kind": p.parent.kind or "Gateway",
            "namespace": p.parent.namespace or route_namespace,
            "name": p.parent.name,
        }
        if p.parent.section_name is not None:
            ref["sectionName"] = p.parent.section_name
        if p.parent.port is not None:
            ref["port"] = p.parent.port
        out.append(
            {
                "parentRef": ref,
                "controllerName": controller,
                "conditions": conditions(p.conditions, generation),
            }
        )
    return {"parents": out}


def address_entry(value: str) -> dict[str, str]:
    """A Gateway status address as the API writes it."""
    kind = "IPAddress" if value.replace(".", "").isdigit() or ":" in value else "Hostname"
    return {"type": kind, "value": value}


def without_address(body: dict[str, Any], why: NoAddress, generation: int) -> dict[str, Any]:
    """A Gateway without an address is not programmed; one asking for an address
    ferryman does not support is not accepted either."""
    replaced = {"Programmed"} if why.accepted else {"Accepted", "Programmed"}
    conditions = [c for c in body["conditions"] if c["type"] not in replaced]
    if not why.accepted:
        conditions.append(_false_condition("Accepted", why.reason, why.message, generation))
    programmed = why.reason if why.accepted else "Invalid"
    conditions.append(_false_condition("Programmed", programmed, why.message, generation))
    return {**body, "addresses": [], "conditions": conditions}


def _false_condition(kind: str, reason: str, message: str, generation: int) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "False",
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
    }
