"""Gateway API attachment: which HTTPRoutes, GRPCRoutes and TLSRoutes a
Gateway's listeners take, with the conditions the specification asks each
object to report (pure: objects in, statuses and routing tables out).

The rules (gateway-api v1.6, apis/v1 gateway_types.go, httproute_types.go,
grpcroute_types.go and tlsroute_types.go):

- a listener is usable as ``listeners.py`` decides, and takes its protocol's
  route kinds (HTTPRoute and GRPCRoute over HTTP and HTTPS, TLSRoute over TLS);
- an HTTPRoute and a GRPCRoute whose hostnames intersect on a listener are
  never merged (grpcroute_types.go): the older takes the listener, the other
  is not Accepted there;
- a route's parentRef selects a Gateway of this class, then its listeners by
  sectionName and port (a ListenerSet parentRef: that ListenerSet's listeners
  merged into its Gateway, records/listener_sets.py; a Gateway's: its own);
  of those, the ones whose allowedRoutes admit the route's namespace (Same,
  All, Selector; Same: the ListenerSet's for its listeners) and kind take it (else
  NotAllowedByListeners); a route with hostnames needs one that intersects a
  taking listener's hostname (else NoMatchingListenerHostname);
- a backendRef must be a core Service (InvalidKind), in the route's namespace
  or granted by a ReferenceGrant (RefNotPermitted), and exist
  (BackendNotFound); the route is accepted anyway and requests its invalid
  backends would have had are answered 500, in proportion to their weights;
- attachedRoutes counts, per listener, the Accepted routes its allowedRoutes
  and the route's parentRefs select whose hostnames (if any) intersect the
  listener's;
- a TLSRoute's hostnames each go to one route per listener: the oldest that
  names it (TLS passthrough routes by the SNI name alone).

Precedence between the rules of all routes on one listener hostname (the
specification's order): an Exact path, then regular expressions (their place is
implementation-specific), then prefixes, longer ones first,
then a method match, then more header matches, then more query matches; ties
go to the older route (creationTimestamp), then namespace/name, then the
order of rules and matches in the route.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from ferryman.kinds.gateway.parse.fields import ObjectReference
from ferryman.kinds.gateway.parse.filters import Filter
from ferryman.kinds.gateway.parse.gateway_api import (
    GROUP,
    BackendRef,
    Gateway,
    HTTPRoute,
    Listener,
    Match,
    ParentRef,
    Rule,
)
from ferryman.kinds.gateway.parse.grpc_route import GRPCMatch, GRPCRoute
from ferryman.kinds.gateway.parse.listener_set import owner, section
from ferryman.kinds.gateway.parse.tls_route import TLSBackend, TLSRoute, TLSRule
from ferryman.kinds.gateway.records.backend_tls import BackendTLS
from ferryman.kinds.gateway.records.listeners import (
    Condition,
    GatewayStatus,
    ListenerStatus,
    SecretCheck,
    gateway_conditions,
    granted,
    listener_status,
)
from ferryman.kinds.gateway.records.selectors import NamespaceLabels, namespace_allowed
from ferryman.resources.reference_grant import ReferenceGrant

Route = HTTPRoute | TLSRoute | GRPCRoute
# Filters the route engine serves; any other is UnsupportedValue.
SUPPORTED_FILTERS = frozenset(
    {
        "RequestHeaderModifier",
        "ResponseHeaderModifier",
        "RequestRedirect",
        "URLRewrite",
        "RequestMirror",
        "CORS",
    }
)
# Filters the route engine serves on a backendRef (after the rule's).
BACKEND_FILTERS = frozenset({"RequestHeaderModifier", "ResponseHeaderModifier"})
# A GRPCRoute's: header changes. Its RequestMirror is not served: the mirror
# locations copy a request over HTTP/1.1 (proxy_pass), which a gRPC backend
# does not speak.
GRPC_FILTERS = BACKEND_FILTERS


def route_id(kind: str, namespace: str, name: str) -> str:
    """How a route is named in the routing tables: ``namespace/name``, a
    GRPCRoute's ``grpc:namespace/name`` (no namespace holds a ":", so an
    HTTPRoute and a GRPCRoute of one name stay apart)."""
    return f"grpc:{namespace}/{name}" if kind == "GRPCRoute" else f"{namespace}/{name}"


def route_kind(route: str) -> tuple[str, str, str]:
    """``route_id``'s kind, namespace and name."""
    kind = "HTTPRoute"
    if route.startswith("grpc:"):
        kind, route = "GRPCRoute", route[5:]
    namespace, _, name = route.partition("/")
    return kind, namespace, name


@dataclass(frozen=True)
class ParentStatus:
    parent: ParentRef
    conditions: tuple[Condition, ...]


@dataclass(frozen=True)
class RouteEntry:
    """One match of one rule, where it is served; ``backends`` are
    ``(namespace, service, port, weight)``, a None service for an invalid one
    (its share of requests is answered 500)."""

    route: str  # namespace/name
    rule: Rule
    match: Match
    backends: tuple[tuple[str, str | None, int, int], ...]
    # RequestMirror filters whose backends resolve: (namespace, service, port, percent).
    mirrors: tuple[tuple[str, str, int, float], ...] = ()
    # Each backend's own filters, in the order of ``backends``.
    backend_filters: tuple[tuple[Filter, ...], ...] = ()
    # Whether each backend speaks h2c (records/backend_protocols.py); () none does.
    h2c: tuple[bool, ...] = ()
    # Each backend's BackendTLSPolicy settings (records/backend_tls.py,
    # BackendTLS; None: plain HTTP); () none has one.
    tls: tuple[BackendTLS | None, ...] = ()


@dataclass(frozen=True)
class PassthroughEntry:
    """The TLSRoute a listener passes one SNI name to, and its backends as
    ``RouteEntry``'s."""

    route: str  # namespace/name
    backends: tuple[tuple[str, str | None, int, int], ...]


@dataclass
class Attachment:
    gateways: dict[tuple[str, str], GatewayStatus] = field(default_factory=dict)
    routes: dict[tuple[str, str], tuple[ParentStatus, ...]] = field(default_factory=dict)
    # (gateway namespace, name, listener name) -> hostname ("" any) -> entries in order
    table: dict[tuple[str, str, str], dict[str, list[RouteEntry]]] = field(default_factory=dict)
    # The same for TLS passthrough listeners: hostname -> the TLSRoute served.
    passthrough: dict[tuple[str, str, str], dict[str, PassthroughEntry]] = field(
        default_factory=dict
    )


ServiceExists = Callable[[str, str], bool]
# Why a Gateway's listener cannot have its port (None: it can).
PortCheck = Callable[[Gateway, Listener], str | None]


# What is wrong with a listener's client certificate validation
# (records/frontend_tls.py: reason, message, no CA usable); None: nothing.
FrontendCheck = Callable[[Gateway, Listener], tuple[str, str, bool] | None]


def _any_port(gateway: Gateway, listener: Listener) -> str | None:
    return None


def attach(
    gateways: Iterable[Gateway],
    routes: Iterable[Route],
    grants: Iterable[ReferenceGrant],
    secret: SecretCheck,
    namespace_labels: NamespaceLabels,
    service_exists: ServiceExists,
    port_unavailable: PortCheck = _any_port,
    tls_passthrough: bool = False,
    h2c: bool = True,
    frontend: FrontendCheck = lambda gateway, listener: None,
    listener_sets: Mapping[tuple[str, str], tuple[str, str]] | None = None,
) -> Attachment:
    """Statuses and routing for ``gateways`` (this class's only) and ``routes``;
    ``tls_passthrough``: TLS listeners can be served; ``h2c``: HTTP listeners
    serve HTTP/2 without TLS (GRPCRoutes); ``listener_sets``: each ListenerSet
    of these Gateways -> its Gateway (routes' ListenerSet parentRefs)."""
    grants = list(grants)
    out = Attachment()
    listeners: dict[tuple[str, str], dict[str, ListenerStatus]] = {}
    by_name = {(g.meta.namespace, g.meta.name): g for g in gateways}
    for key, g in by_name.items():
        listeners[key] = {
            lst.name: listener_status(
                g,
                lst,
                grants,
                secret,
                port_unavailable(g, lst),
                tls_passthrough,
                h2c,
                frontend(g, lst),
            )
            for lst in g.listeners
        }
    attached: dict[tuple[str, str, str], int] = {}
    # Per listener, the hostnames each HTTP kind took there (oldest route first).
    claims: dict[tuple[str, str, str], dict[str, list[str]]] = {}
    ordered = sorted(
        routes, key=lambda r: (r.meta.creation_timestamp or "", r.meta.namespace, r.meta.name)
    )
    for route in ordered:
        parents = []
        for parent in route.parents:
            gw_key = (parent.namespace or route.meta.namespace, parent.name)
            if parent.group != GROUP or parent.kind not in ("Gateway", "ListenerSet"):
                continue
            if parent.kind == "ListenerSet":
                gw_key = (listener_sets or {}).get(gw_key, ("", ""))
            if (gw := by_name.get(gw_key)) is None:
                continue  # not one of ours: its controller reports it
            statuses = listeners[gw_key]
            conditions, taking = _parent_conditions(route, parent, gw, statuses, namespace_labels)
            if conditions[0].status and not isinstance(route, TLSRoute):
                conditions, taking = _claim(claims, gw_key, route, conditions, taking)
            # attachedRoutes: the routes Accepted on a listener whose hostname
            # intersects theirs (v1.6; the suite holds implementations to it).
            for lst in taking if conditions[0].status else ():
                if route.hostnames and not _intersect(lst.hostname, route.hostnames):
                    continue
                count_key = (*gw_key, lst.name)
                attached[count_key] = attached.get(count_key, 0) + 1
            refs = _resolved_refs(route, grants, service_exists)
            parents.append(ParentStatus(parent, (*conditions, refs)))
            if conditions[0].status:
                for lst in taking:
                    if statuses[lst.name].usable:
                        _add_entries(out, gw_key, lst, route, grants, service_exists)
        out.routes[(route.meta.namespace, route.meta.name)] = tuple(parents)
    for key in by_name:
        final = tuple(
            ListenerStatus(s.name, s.supported_kinds, attached.get((*key, s.name), 0), s.conditions)
            for s in listeners[key].values()
        )
        out.gateways[key] = GatewayStatus(gateway_conditions(final), final)
    for entries_by_host in out.table.values():
        for entries in entries_by_host.values():
            entries.sort(key=_precedence)
    return out


def _parent_conditions(
    route: Route,
    parent: ParentRef,
    gw: Gateway,
    statuses: Mapping[str, ListenerStatus],
    namespace_labels: NamespaceLabels,
) -> tuple[tuple[Condition, ...], list[Listener]]:
    """The Accepted condition for one parentRef, and the listeners that take the route."""
    # A Gateway parentRef selects its own listeners, a ListenerSet's that
    # ListenerSet's (merged into the Gateway: records/listener_sets.py).
    origin = (parent.namespace or route.meta.namespace, parent.name)
    selected = [
        lst
        for lst in gw.listeners
        if (owner(lst) == origin if parent.kind == "ListenerSet" else lst.origin is None)
        and parent.section_name in (None, section(lst))
        and parent.port in (None, lst.port)
    ]
    if not selected:
        return (
            Condition("Accepted", False, "NoMatchingParent", "no listener matches the parentRef"),
        ), []
    allowing = [
        lst
        for lst in selected
        if (GROUP, route.kind) in statuses[lst.name].supported_kinds
        and namespace_allowed(
            lst.namespaces_from,
            lst.namespace_selector,
            lst.origin.namespace if lst.origin else gw.meta.namespace,
            route.meta.namespace,
            namespace_labels,
        )
    ]
    if not allowing:
        reason = "NotAllowedByListeners"
        return (Condition("Accepted", False, reason, "no listener allows this route"),), []
    if route.hostnames and not any(_intersect(lst.hostname, route.hostnames) for lst in allowing):
        reason = "NoMatchingListenerHostname"
        return (Condition("Accepted", False, reason, "no listener hostname matches"),), allowing
    if isinstance(route, TLSRoute):
        # The stream balancer picks a peer of one endpoint set (passthrough.py).
        if sum(1 for rule in route.rules for b in rule.backends if b.weight > 0) > 1:
            message = "weighted backendRefs are not supported: one backendRef with weight"
            return (Condition("Accepted", False, "UnsupportedValue", message),), allowing
        return (Condition("Accepted", True, "Accepted"),), allowing
    served = GRPC_FILTERS if isinstance(route, GRPCRoute) else SUPPORTED_FILTERS
    unsupported = sorted(
        {f.type for rule in route.rules for f in rule.filters if f.type not in served}
        | {
            f.type
            for rule in route.rules
            for b in rule.backends
            for f in b.filters
            if f.type not in BACKEND_FILTERS
        }
    )
    if unsupported:
        message = f"unsupported filters: {', '.join(unsupported)}"
        return (Condition("Accepted", False, "UnsupportedValue", message),), allowing
    return (Condition("Accepted", True, "Accepted"),), allowing


def _claim(
    claims: dict[tuple[str, str, str], dict[str, list[str]]],
    gw_key: tuple[str, str],
    route: HTTPRoute | GRPCRoute,
    conditions: tuple[Condition, ...],
    taking: list[Listener],
) -> tuple[tuple[Condition, ...], list[Listener]]:
    """The listeners an HTTP route keeps once older routes of the other HTTP
    kind (HTTPRoute, GRPCRoute) took the hostnames it would share with them
    there; not Accepted when it keeps none."""
    other = "HTTPRoute" if isinstance(route, GRPCRoute) else "GRPCRoute"
    kept, lost = [], []
    for lst in taking:
        mine = _intersect(lst.hostname, route.hostnames)
        taken = claims.setdefault((*gw_key, lst.name), {})
        if any(_overlap(h, t) for h in mine for t in taken.get(other, ())):
            lost.append(lst.name)
            continue
        taken.setdefault(route.kind, []).extend(mine)
        kept.append(lst)
    if lost and not kept:
        message = (f"an older {other} serves these hostnames on listener(s) "
                   f"{', '.join(lost)}; HTTPRoutes and GRPCRoutes are not merged")  # fmt: skip
        return (Condition("Accepted", False, "NotAllowedByListeners", message),), []
    return conditions, kept


def _overlap(a: str, b: str) -> bool:
    """Two hostnames of the tables ("" any) that a request can match both."""
    return a == "" or b == "" or covers(a, b) or covers(b, a)


def _intersect(listener: str | None, hostnames: tuple[str, ...]) -> list[str]:
    """The hostnames a route serves on a listener ("" for any host)."""
    if not hostnames:
        return [listener or ""]
    if listener is None:
        return list(hostnames)
    out = []
    for h in hostnames:
        if covers(listener, h):
            out.append(h)
        elif covers(h, listener):
            out.append(listener)
    return out


def covers(pattern: str, host: str) -> bool:
    """Whether ``pattern`` (exact, or ``*.`` and a suffix of one or more labels)
    matches ``host`` (itself possibly a wildcard, which then must be as narrow)."""
    if pattern == host:
        return True
    if not pattern.startswith("*."):
        return False
    suffix = pattern[1:]
    return host.endswith(suffix) and len(host) > len(suffix)


def _resolved_refs(
    route: Route, grants: list[ReferenceGrant], service_exists: ServiceExists
) -> Condition:
    rules: list[Rule | TLSRule] = list(route.rules)
    for rule in rules:
        refs = [b.ref for b in rule.backends]
        if isinstance(rule, Rule):
            refs += [f.backend for f in rule.filters if f.type == "RequestMirror" and f.backend]
        for ref in refs:
            why = _backend_problem(route, ref, grants, service_exists)
            if why is not None:
                return Condition("ResolvedRefs", False, why[0], why[1])
    return Condition("ResolvedRefs", True, "ResolvedRefs")


def _backend_problem(
    route: Route, ref: ObjectReference, grants: list[ReferenceGrant], exists: ServiceExists
) -> tuple[str, str] | None:
    if (ref.group, ref.kind) != ("", "Service"):
        return "InvalidKind", f"backendRef kind {ref.group}/{ref.kind} is not supported"
    namespace = ref.namespace or route.meta.namespace
    if namespace != route.meta.namespace and not granted(
        grants, (GROUP, route.kind), route.meta.namespace, ("", "Service"), namespace, ref.name
    ):
        return "RefNotPermitted", f"Service {namespace}/{ref.name} is not granted to this route"
    if not exists(namespace, ref.name):
        return "BackendNotFound", f"Service {namespace}/{ref.name} not found"
    return None


def _add_entries(
    out: Attachment,
    gw_key: tuple[str, str],
    lst: Listener,
    route: Route,
    grants: list[ReferenceGrant],
    exists: ServiceExists,
) -> None:
    hosts = _intersect(lst.hostname, route.hostnames)
    if isinstance(route, TLSRoute):
        _add_passthrough(out, (*gw_key, lst.name), hosts, route, grants, exists)
        return
    table = out.table.setdefault((*gw_key, lst.name), {})
    name = route_id(route.kind, route.meta.namespace, route.meta.name)
    for rule in route.rules:
        backends = _resolved(route, rule.backends, grants, exists)
        mirrors = tuple(
            (f.backend.namespace or route.meta.namespace, f.backend.name, f.mirror_port or 0,
             f.mirror_percent)
            for f in rule.filters
            if f.type == "RequestMirror" and f.backend is not None
            and _backend_problem(route, f.backend, grants, exists) is None
        )  # fmt: skip
        for match in rule.matches:
            for host in hosts:
                filters = tuple(b.filters for b in rule.backends)
                entry = RouteEntry(name, rule, match, backends, mirrors, filters)
                table.setdefault(host, []).append(entry)


def _resolved(
    route: Route,
    backends: Iterable[BackendRef | TLSBackend],
    grants: list[ReferenceGrant],
    exists: ServiceExists,
) -> tuple[tuple[str, str | None, int, int], ...]:
    """``(namespace, service, port, weight)`` of each backendRef, a None
    service for one that does not resolve."""
    return tuple(
        (
            b.ref.namespace or route.meta.namespace,
            None if _backend_problem(route, b.ref, grants, exists) else b.ref.name,
            b.port or 0,
            b.weight,
        )
        for b in backends
    )


def _add_passthrough(
    out: Attachment,
    key: tuple[str, str, str],
    hosts: list[str],
    route: TLSRoute,
    grants: list[ReferenceGrant],
    exists: ServiceExists,
) -> None:
    """Each SNI name to the oldest route naming it (routes come oldest first)."""
    backends = _resolved(route, [b for rule in route.rules for b in rule.backends], grants, exists)
    table = out.passthrough.setdefault(key, {})
    for host in hosts:
        table.setdefault(
            host, PassthroughEntry(f"{route.meta.namespace}/{route.meta.name}", backends)
        )


def _precedence(entry: RouteEntry) -> tuple[int, int, int, int, int]:
    """The sort key of the specification's order (lower first); Python's sort is
    stable, so entries keep the route, rule and match order they were added in."""
    m = entry.match
    if isinstance(m, GRPCMatch):
        # GRPCRoute's own order: characters of service, then of method, then
        # header matches (an HTTPRoute never shares a hostname with it, _claim).
        return (0, -len(m.service), -len(m.grpc_method), -len(m.headers), 0)
    # RegularExpression's place is the implementation's to choose: between Exact
    # and PathPrefix (as NGINX tries regex locations before a prefix), so that a
    # "/" prefix does not make every regex unreachable.
    kind = {"Exact": 0, "RegularExpression": 1}.get(m.path_type, 2)
    # A prefix's trailing slash changes nothing it matches ("/a/" is "/a").
    path = m.path.rstrip("/") if m.path_type == "PathPrefix" else m.path
    return (kind, -len(path), 0 if m.method else 1, -len(m.headers), -len(m.query))
