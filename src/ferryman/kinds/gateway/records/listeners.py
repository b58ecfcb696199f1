"""A Gateway's listeners: whether each can be served and why not, the route
kinds it takes, and the Gateway's own conditions from its listeners' (pure).

The rules (gateway-api v1.6, apis/v1 gateway_types.go): a listener is usable
when its protocol is served (HTTP and HTTPS by the HTTP route engine; TLS,
passed through or ended, by the stream module's records where NGINX has it),
its port is free, the certificateRefs of a listener ending TLS (HTTPS, TLS in
mode Terminate) resolve (core Secrets, across namespaces only with a
ReferenceGrant, present and usable), and no other listener on its port
conflicts (a different protocol, or TLS listeners of both modes, which one
stream server cannot be: ProtocolConflict; the same hostname:
HostnameConflict). Each protocol takes
its route kinds: HTTPRoute and GRPCRoute over HTTP and HTTPS, TLSRoute over
TLS. GRPCRoute over HTTP needs HTTP/2 without TLS (h2c, prior knowledge) beside
HTTP/1.1 on one socket, which NGINX serves since 1.25.1 (``http2 on``: the
first bytes tell the connection's protocol) and Debian's 1.22 does not: there
an HTTP listener takes HTTPRoutes only (docs/gateway-api.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ferryman.kinds.gateway.parse.gateway_api import GROUP, Gateway, Listener
from ferryman.resources.reference_grant import ReferenceGrant

SUPPORTED_PROTOCOLS = ("HTTP", "HTTPS")
HTTP_ROUTE = (GROUP, "HTTPRoute")
TLS_ROUTE = (GROUP, "TLSRoute")
GRPC_ROUTE = (GROUP, "GRPCRoute")
ROUTE_KINDS = {
    "HTTP": (HTTP_ROUTE, GRPC_ROUTE),
    "HTTPS": (HTTP_ROUTE, GRPC_ROUTE),
    "TLS": (TLS_ROUTE,),
}

# A Secret's usability for a listener: None when usable, else why not.
SecretCheck = Callable[[str, str], str | None]


@dataclass(frozen=True)
class Condition:
    type: str
    status: bool
    reason: str
    message: str = ""


@dataclass(frozen=True)
class ListenerStatus:
    name: str
    supported_kinds: tuple[tuple[str, str], ...]
    attached_routes: int
    conditions: tuple[Condition, ...]

    @property
    def usable(self) -> bool:
        return all(c.status for c in self.conditions if c.type in ("Accepted", "ResolvedRefs"))


@dataclass(frozen=True)
class GatewayStatus:
    conditions: tuple[Condition, ...]
    listeners: tuple[ListenerStatus, ...]


def listener_status(
    gw: Gateway,
    lst: Listener,
    grants: list[ReferenceGrant],
    secret: SecretCheck,
    port_problem: str | None,
    tls_passthrough: bool = False,
    h2c: bool = True,
    frontend: tuple[str, str, bool] | None = None,
) -> ListenerStatus:
    """``tls_passthrough``: TLS listeners can be served (the data plane has
    the stream module); ``h2c``: HTTP listeners serve HTTP/2 without TLS
    beside HTTP/1.1, so they take GRPCRoutes; ``frontend``: what is wrong
    with an HTTPS listener's client certificate validation (its ResolvedRefs
    reason, message, and whether no CA reference is usable:
    records/frontend_tls.py)."""
    conditions: list[Condition] = []
    served = lst.protocol in SUPPORTED_PROTOCOLS or (tls_passthrough and lst.protocol == "TLS")
    modes = _mixed_modes(gw, lst)
    # A TLS listener not served takes no route kind, nor one of two modes on a port.
    kinds, bad_kinds = ((), []) if not served or modes else _route_kinds(lst, h2c)
    conflict = conflict_of(gw, lst)
    if not served:
        conditions.append(Condition("Accepted", False, "UnsupportedProtocol",
                                    f"protocol {lst.protocol} is not supported"))  # fmt: skip
    elif port_problem is not None:
        conditions.append(Condition("Accepted", False, "PortUnavailable", port_problem))
    elif lst.protocol == "HTTPS" and lst.tls_mode == "Passthrough":
        conditions.append(Condition("Accepted", False, "UnsupportedValue",
                                    "tls mode Passthrough needs protocol TLS"))  # fmt: skip
    elif modes is not None:
        conditions.append(Condition("Accepted", False, "ProtocolConflict", modes))
    elif frontend is not None and frontend[2]:
        conditions.append(Condition("Accepted", False, "NoValidCACertificate", frontend[1]))
    else:
        conditions.append(Condition("Accepted", True, "Accepted"))
    refs = Condition("ResolvedRefs", True, "ResolvedRefs")
    if bad_kinds:
        refs = Condition("ResolvedRefs", False, "InvalidRouteKinds",
                         f"unsupported route kinds: {', '.join(bad_kinds)}")  # fmt: skip
    elif lst.protocol == "HTTPS" or (lst.protocol == "TLS" and lst.tls_mode == "Terminate"):
        why = _certificates(gw, lst, grants, secret)
        if why is None and frontend is not None:
            why = frontend[:2]
        if why is not None:
            refs = Condition("ResolvedRefs", False, why[0], why[1])
    conditions.append(refs)
    conditions.append(
        Condition("Conflicted", True, conflict)
        if conflict
        else Condition("Conflicted", False, "NoConflicts")
    )
    usable = conditions[0].status and refs.status and not conflict
    conditions.append(
        Condition("Programmed", True, "Programmed")
        if usable
        else Condition("Programmed", False, "Invalid")
    )
    return ListenerStatus(lst.name, kinds, 0, tuple(conditions))


def _route_kinds(lst: Listener, h2c: bool) -> tuple[tuple[tuple[str, str], ...], list[str]]:
    """The route kinds a listener takes (its protocol's when it names none),
    and those it names that its protocol cannot take."""
    serves = ROUTE_KINDS.get(lst.protocol, ())
    if lst.protocol == "HTTP" and not h2c:
        serves = tuple(k for k in serves if k != GRPC_ROUTE)
    if lst.kinds is None:
        return serves, []
    good = tuple(dict.fromkeys((k.group, k.kind) for k in lst.kinds if (k.group, k.kind) in serves))
    bad = [f"{k.group}/{k.kind}" for k in lst.kinds if (k.group, k.kind) not in serves]
    return good, bad


def conflict_of(gw: Gateway, lst: Listener) -> str | None:
    """The Conflicted reason of ``lst`` among ``gw``'s listeners on its port
    (a ListenerSet's listener is checked the same way: listener_sets.py)."""
    for other in gw.listeners:
        if other is lst or other.port != lst.port:
            continue
        if other.protocol != lst.protocol or other.tls_mode != lst.tls_mode:
            return "ProtocolConflict"
        if other.hostname == lst.hostname:
            return "HostnameConflict"
    return None


def _mixed_modes(gw: Gateway, lst: Listener) -> str | None:
    """Why a TLS listener shares its port with one of the other mode (the
    TLSRouteModeMixed feature, which ferryman does not claim), else None."""
    if lst.protocol != "TLS":
        return None
    for other in gw.listeners:
        if other.port == lst.port and other.protocol == "TLS" and other.tls_mode != lst.tls_mode:
            return (
                f"listener {other.name} on port {lst.port} is TLS of mode {other.tls_mode}: "
                "one port either ends TLS or passes it through"
            )
    return None


def _certificates(
    gw: Gateway, lst: Listener, grants: list[ReferenceGrant], secret: SecretCheck
) -> tuple[str, str] | None:
    if not lst.certificates:
        return "InvalidCertificateRef", "a listener ending TLS needs a certificateRef"
    for ref in lst.certificates:
        if (ref.group, ref.kind) != ("", "Secret"):
            return "InvalidCertificateRef", f"unsupported certificateRef {ref.group}/{ref.kind}"
        # A ListenerSet's listener refers from the ListenerSet (its namespace, its grants).
        kind, home = (
            ("ListenerSet", lst.origin.namespace) if lst.origin else ("Gateway", gw.meta.namespace)
        )
        namespace = ref.namespace or home
        if namespace != home and not granted(
            grants, (GROUP, kind), home, ("", "Secret"), namespace, ref.name
        ):
            return (
                "RefNotPermitted",
                f"Secret {namespace}/{ref.name} is not granted to this {kind}",
            )
        if (why := secret(namespace, ref.name)) is not None:
            return "InvalidCertificateRef", f"Secret {namespace}/{ref.name}: {why}"
    return None


def granted(
    grants: list[ReferenceGrant],
    source: tuple[str, str],
    source_namespace: str,
    target: tuple[str, str],
    target_namespace: str,
    name: str,
) -> bool:
    return any(
        g.meta.namespace == target_namespace and g.allows(*source, source_namespace, *target, name)
        for g in grants
    )


def gateway_conditions(listeners: tuple[ListenerStatus, ...]) -> tuple[Condition, ...]:
    usable = [s for s in listeners if s.usable and not _conflicted(s)]
    if not usable:
        return (
            Condition("Accepted", False, "ListenersNotValid", "no listener is valid"),
            Condition("Programmed", False, "Invalid", "no listener is valid"),
        )
    accepted_reason = "Accepted" if len(usable) == len(listeners) else "ListenersNotValid"
    return (
        Condition("Accepted", True, accepted_reason),
        Condition("Programmed", True, "Programmed"),
    )


def _conflicted(s: ListenerStatus) -> bool:
    return any(c.type == "Conflicted" and c.status for c in s.conditions)
