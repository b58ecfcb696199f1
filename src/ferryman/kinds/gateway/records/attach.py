"""Gateway API attachment: which HTTPRoutes a Gateway's listeners take, with the
conditions the specification asks each object to report (pure: objects in,
statuses and a routing table out).

The rules (gateway-api v1.6, apis/v1 gateway_types.go and httproute_types.go):

- a listener is usable when its protocol is HTTP or HTTPS, an HTTPS listener's
  certificateRefs resolve (core Secrets, across namespaces only with a
  ReferenceGrant, present and usable), and no other listener on its port
  conflicts (a different protocol: ProtocolConflict; the same hostname:
  HostnameConflict);
- a route's parentRef selects a Gateway of this class, then its listeners by
  sectionName and port; of those, the ones whose allowedRoutes admit the
  route's namespace (Same, All, Selector) and kind take it (else
  NotAllowedByListeners); a route with hostnames needs one that intersects a
  taking listener's hostname (else NoMatchingListenerHostname);
- a backendRef must be a core Service (InvalidKind), in the route's namespace
  or granted by a ReferenceGrant (RefNotPermitted), and exist
  (BackendNotFound); the route is accepted anyway and requests its invalid
  backends would have had are answered 500, in proportion to their weights;
- attachedRoutes counts, per listener, the Accepted routes its allowedRoutes
  and the route's parentRefs select whose hostnames (if any) intersect the
  listener's.

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
    Gateway,
    HTTPRoute,
    Listener,
    Match,
    ParentRef,
    Rule,
)
from ferryman.kinds.gateway.parse.reference_grant import ReferenceGrant

SUPPORTED_PROTOCOLS = ("HTTP", "HTTPS")
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
HTTP_ROUTE = (GROUP, "HTTPRoute")


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


@dataclass
class Attachment:
    gateways: dict[tuple[str, str], GatewayStatus] = field(default_factory=dict)
    routes: dict[tuple[str, str], tuple[ParentStatus, ...]] = field(default_factory=dict)
    # (gateway namespace, name, listener name) -> hostname ("" any) -> entries in order
    table: dict[tuple[str, str, str], dict[str, list[RouteEntry]]] = field(default_factory=dict)


# A Secret's usability for a listener: None when usable, else why not.
SecretCheck = Callable[[str, str], str | None]
# A namespace's labels (Selector), None when it does not exist.
NamespaceLabels = Callable[[str], Mapping[str, str] | None]
ServiceExists = Callable[[str, str], bool]
# Why a listener's port cannot be served (ferryman's own ports), None when it can.
# Why a Gateway cannot have a port (None: it can).
PortCheck = Callable[[Gateway, int], str | None]


def _any_port(gateway: Gateway, port: int) -> str | None:
    return None


def attach(
    gateways: Iterable[Gateway],
    routes: Iterable[HTTPRoute],
    grants: Iterable[ReferenceGrant],
    secret: SecretCheck,
    namespace_labels: NamespaceLabels,
    service_exists: ServiceExists,
    port_unavailable: PortCheck = _any_port,
) -> Attachment:
    """Statuses and routing for ``gateways`` (this class's only) and ``routes``."""
    grants = list(grants)
    out = Attachment()
    listener_status: dict[tuple[str, str], dict[str, ListenerStatus]] = {}
    by_name = {(g.meta.namespace, g.meta.name): g for g in gateways}
    for key, g in by_name.items():
        listener_status[key] = {
            lst.name: _listener_status(g, lst, grants, secret, port_unavailable(g, lst.port))
            for lst in g.listeners
        }
    attached: dict[tuple[str, str, str], int] = {}
    ordered = sorted(
        routes, key=lambda r: (r.meta.creation_timestamp or "", r.meta.namespace, r.meta.name)
    )
    for route in ordered:
        parents = []
        for parent in route.parents:
            if (parent.group, parent.kind) != (GROUP, "Gateway"):
                continue
            gw_key = (parent.namespace or route.meta.namespace, parent.name)
            if (gw := by_name.get(gw_key)) is None:
                continue  # not one of ours: its controller reports it
            statuses = listener_status[gw_key]
            conditions, taking = _parent_conditions(route, parent, gw, statuses, namespace_labels)
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
            for s in listener_status[key].values()
        )
        out.gateways[key] = GatewayStatus(_gateway_conditions(final), final)
    for entries_by_host in out.table.values():
        for entries in entries_by_host.values():
            entries.sort(key=_precedence)
    return out


def _listener_status(
    gw: Gateway,
    lst: Listener,
    grants: list[ReferenceGrant],
    secret: SecretCheck,
    port_problem: str | None,
) -> ListenerStatus:
    conditions: list[Condition] = []
    kinds, bad_kinds = _route_kinds(lst)
    conflict = _conflict(gw, lst)
    if lst.protocol not in SUPPORTED_PROTOCOLS:
        conditions.append(Condition("Accepted", False, "UnsupportedProtocol",
                                    f"protocol {lst.protocol} is not supported"))  # fmt: skip
    elif port_problem is not None:
        conditions.append(Condition("Accepted", False, "PortUnavailable", port_problem))
    elif lst.protocol == "HTTPS" and lst.tls_mode == "Passthrough":
        conditions.append(Condition("Accepted", False, "UnsupportedValue",
                                    "tls mode Passthrough needs protocol TLS"))  # fmt: skip
    else:
        conditions.append(Condition("Accepted", True, "Accepted"))
    refs = Condition("ResolvedRefs", True, "ResolvedRefs")
    if bad_kinds:
        refs = Condition("ResolvedRefs", False, "InvalidRouteKinds",
                         f"unsupported route kinds: {', '.join(bad_kinds)}")  # fmt: skip
    elif lst.protocol == "HTTPS":
        why = _certificates(gw, lst, grants, secret)
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


def _route_kinds(lst: Listener) -> tuple[tuple[tuple[str, str], ...], list[str]]:
    if lst.kinds is None:
        return ((HTTP_ROUTE,) if lst.protocol in SUPPORTED_PROTOCOLS else ()), []
    good = tuple((k.group, k.kind) for k in lst.kinds if (k.group, k.kind) == HTTP_ROUTE)
    bad = [f"{k.group}/{k.kind}" for k in lst.kinds if (k.group, k.kind) != HTTP_ROUTE]
    return good, bad


def _conflict(gw: Gateway, lst: Listener) -> str | None:
    for other in gw.listeners:
        if other is lst or other.port != lst.port:
            continue
        if other.protocol != lst.protocol:
            return "ProtocolConflict"
        if other.hostname == lst.hostname:
            return "HostnameConflict"
    return None


def _certificates(
    gw: Gateway, lst: Listener, grants: list[ReferenceGrant], secret: SecretCheck
) -> tuple[str, str] | None:
    if not lst.certificates:
        return "InvalidCertificateRef", "an HTTPS listener needs a certificateRef"
    for ref in lst.certificates:
        if (ref.group, ref.kind) != ("", "Secret"):
            return "InvalidCertificateRef", f"unsupported certificateRef {ref.group}/{ref.kind}"
        namespace = ref.namespace or gw.meta.namespace
        if namespace != gw.meta.namespace and not _granted(
            grants, (GROUP, "Gateway"), gw.meta.namespace, ("", "Secret"), namespace, ref.name
        ):
            return (
                "RefNotPermitted",
                f"Secret {namespace}/{ref.name} is not granted to this Gateway",
            )
        if (why := secret(namespace, ref.name)) is not None:
            return "InvalidCertificateRef", f"Secret {namespace}/{ref.name}: {why}"
    return None


def _granted(
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


def _parent_conditions(
    route: HTTPRoute,
    parent: ParentRef,
    gw: Gateway,
    statuses: Mapping[str, ListenerStatus],
    namespace_labels: NamespaceLabels,
) -> tuple[tuple[Condition, ...], list[Listener]]:
    """The Accepted condition for one parentRef, and the listeners that take the route."""
    selected = [
        lst
        for lst in gw.listeners
        if parent.section_name in (None, lst.name) and parent.port in (None, lst.port)
    ]
    if not selected:
        return (
            Condition("Accepted", False, "NoMatchingParent", "no listener matches the parentRef"),
        ), []
    allowing = [
        lst
        for lst in selected
        if HTTP_ROUTE in statuses[lst.name].supported_kinds
        and _namespace_allowed(lst, gw.meta.namespace, route.meta.namespace, namespace_labels)
    ]
    if not allowing:
        reason = "NotAllowedByListeners"
        return (Condition("Accepted", False, reason, "no listener allows this route"),), []
    if route.hostnames and not any(_intersect(lst.hostname, route.hostnames) for lst in allowing):
        reason = "NoMatchingListenerHostname"
        return (Condition("Accepted", False, reason, "no listener hostname matches"),), allowing
    unsupported = sorted(
        {f.type for rule in route.rules for f in rule.filters if f.type not in SUPPORTED_FILTERS}
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


def _namespace_allowed(
    lst: Listener, gw_namespace: str, route_namespace: str, namespace_labels: NamespaceLabels
) -> bool:
    if lst.namespaces_from == "All":
        return True
    if lst.namespaces_from == "Same":
        return route_namespace == gw_namespace
    labels = namespace_labels(route_namespace)
    return labels is not None and _selects(lst.namespace_selector or {}, labels)


def _selects(selector: Mapping[str, object], labels: Mapping[str, str]) -> bool:
    """A label selector (matchLabels and matchExpressions) against ``labels``."""
    match_labels = selector.get("matchLabels") or {}
    if isinstance(match_labels, Mapping) and any(
        labels.get(str(k)) != v for k, v in match_labels.items()
    ):
        return False
    expressions = selector.get("matchExpressions") or []
    for e in expressions if isinstance(expressions, list) else []:
        if not isinstance(e, Mapping):
            return False
        key, op, values = str(e.get("key")), e.get("operator"), e.get("values") or []
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


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
    route: HTTPRoute, grants: list[ReferenceGrant], service_exists: ServiceExists
) -> Condition:
    for rule in route.rules:
        refs = [b.ref for b in rule.backends]
        refs += [f.backend for f in rule.filters if f.type == "RequestMirror" and f.backend]
        for ref in refs:
            why = _backend_problem(route, ref, grants, service_exists)
            if why is not None:
                return Condition("ResolvedRefs", False, why[0], why[1])
    return Condition("ResolvedRefs", True, "ResolvedRefs")


def _backend_problem(
    route: HTTPRoute, ref: ObjectReference, grants: list[ReferenceGrant], exists: ServiceExists
) -> tuple[str, str] | None:
    if (ref.group, ref.kind) != ("", "Service"):
        return "InvalidKind", f"backendRef kind {ref.group}/{ref.kind} is not supported"
    namespace = ref.namespace or route.meta.namespace
    if namespace != route.meta.namespace and not _granted(
        grants, HTTP_ROUTE, route.meta.namespace, ("", "Service"), namespace, ref.name
    ):
        return "RefNotPermitted", f"Service {namespace}/{ref.name} is not granted to this route"
    if not exists(namespace, ref.name):
        return "BackendNotFound", f"Service {namespace}/{ref.name} not found"
    return None


def _add_entries(
    out: Attachment,
    gw_key: tuple[str, str],
    lst: Listener,
    route: HTTPRoute,
    grants: list[ReferenceGrant],
    exists: ServiceExists,
) -> None:
    hosts = _intersect(lst.hostname, route.hostnames)
    table = out.table.setdefault((*gw_key, lst.name), {})
    name = f"{route.meta.namespace}/{route.meta.name}"
    for rule in route.rules:
        backends = tuple(
            (
                b.ref.namespace or route.meta.namespace,
                None if _backend_problem(route, b.ref, grants, exists) else b.ref.name,
                b.port or 0,
                b.weight,
            )
            for b in rule.backends
        )
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


def _precedence(entry: RouteEntry) -> tuple[int, int, int, int, int]:
    """The sort key of the specification's order (lower first); Python's sort is
    stable, so entries keep the route, rule and match order they were added in."""
    m = entry.match
    # RegularExpression's place is the implementation's to choose: between Exact
    # and PathPrefix (as NGINX tries regex locations before a prefix), so that a
    # "/" prefix does not make every regex unreachable.
    kind = {"Exact": 0, "RegularExpression": 1}.get(m.path_type, 2)
    # A prefix's trailing slash changes nothing it matches ("/a/" is "/a").
    path = m.path.rstrip("/") if m.path_type == "PathPrefix" else m.path
    return (kind, -len(path), 0 if m.method else 1, -len(m.headers), -len(m.query))


def _gateway_conditions(listeners: tuple[ListenerStatus, ...]) -> tuple[Condition, ...]:
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
