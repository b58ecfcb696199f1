"""gateway.networking.k8s.io/v1 Gateway and HTTPRoute: typed views with the
standard channel's validation (GatewayClass's: ``gateway_class``).

On a cluster the API server holds these to the CRDs' schemas and CEL rules
(v1.6); in manifests mode nothing does, so the parsers check the same rules
(patterns, enums, bounds, the rules between fields) and report them in
Kubernetes' field-error format (``nic_fields.Problem``). What is valid but not
implemented is not refused here: the route's status says so (Accepted False,
``UnsupportedValue``), as the specification asks.

Defaults are the CRDs' own: a parentRef's group and kind (Gateway), a
backendRef's kind (Service) and weight (1), a rule without matches matching
``PathPrefix /``, a path match's type (PathPrefix) and a header match's
(Exact), a listener's allowedRoutes (namespaces from Same).

The fields the kinds share are in ``gateway_fields``, an HTTPRoute's filters in
``gateway_filters`` and ReferenceGrant in ``reference_grant``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ferryman.kinds.gateway.parse.fields import (
    HEADER_NAME_RE,
    HOSTNAME_RE,
    PATH_RE,
    ObjectReference,
    allowed_listeners,
    parse_duration,
    parse_reference,
)
from ferryman.kinds.gateway.parse.filters import FILTER_KEYS, Filter, check_filters, parse_filter
from ferryman.kinds.gateway.parse.frontend_tls import FrontendTLS, parse_frontend
from ferryman.resources.meta import Meta
from ferryman.resources.nic_fields import (
    Context,
    Obj,
    Parsed,
    duplicate,
    invalid,
    parse_object_meta,
    required,
)
from ferryman.resources.pcre import pcre_error
from ferryman.resources.validation import dns1123_subdomain

GROUP = "gateway.networking.k8s.io"
CONTROLLER_NAME = "ferryman.io/gateway-controller"

# The CRDs' patterns only these kinds use (the shared ones: gateway_fields).
_SECTION_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# The CRD's pattern: any such name is valid (an unknown one is reported in the
# listener's status, UnsupportedProtocol), not only the five the spec names.
_PROTOCOL_RE = re.compile(
    r"^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$"
    r"|[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/[A-Za-z0-9]+$"
)
_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH")
MAX_WEIGHT = 1_000_000


# ---- Gateway ------------------------------------------------------------------------


@dataclass(frozen=True)
class RouteKind:
    group: str
    kind: str


@dataclass(frozen=True)
class ListenerOrigin:
    """The ListenerSet a Gateway's listener came from (records/listener_sets.py)."""

    namespace: str
    name: str
    section: str  # the listener's name within the ListenerSet


@dataclass(frozen=True)
class Listener:
    name: str
    hostname: str | None
    port: int
    protocol: str
    tls_mode: str | None  # Terminate | Passthrough, None without tls
    certificates: tuple[ObjectReference, ...]
    namespaces_from: str  # All | Same | Selector
    namespace_selector: Mapping[str, Any] | None
    kinds: tuple[RouteKind, ...] | None  # None: the protocol's defaults
    # None: the Gateway's own; else the ListenerSet it was merged from, whose
    # namespace is the listener's (allowedRoutes Same, certificateRefs).
    origin: ListenerOrigin | None = None


@dataclass(frozen=True)
class Gateway:
    meta: Meta
    class_name: str
    listeners: tuple[Listener, ...]
    addresses: tuple[tuple[str, str], ...]  # (type, value)
    # spec.tls.backend.clientCertificateRef: the certificate presented to
    # backends spoken to in TLS (a BackendTLSPolicy's).
    backend_client_cert: ObjectReference | None = None
    # spec.tls.frontend: client certificate validation (parse/frontend_tls.py).
    frontend: FrontendTLS | None = None
    # spec.allowedListeners.namespaces: which ListenerSets may attach (None
    # by default, or Same, Selector, All) and the Selector's label selector.
    listener_sets_from: str = "None"
    listener_sets_selector: Mapping[str, Any] | None = None
    # spec.infrastructure.parametersRef: ferryman has no parameters kind for
    # Gateways, so any reference makes the Gateway InvalidParameters.
    parameters: ObjectReference | None = None


LISTENER_KEYS = frozenset({"name", "hostname", "port", "protocol", "tls", "allowedRoutes"})
_REF_KEYS = frozenset({"group", "kind", "name", "namespace"})
_PARAMS_KEYS = frozenset({"group", "kind", "name"})


def parse_gateway(obj: Mapping[str, Any]) -> Parsed[Gateway]:
    ctx = Context()
    meta = parse_object_meta(obj, ctx)
    spec = Obj.root(
        ctx,
        obj.get("spec"),
        "spec",
        frozenset({"gatewayClassName", "listeners", "addresses", "infrastructure", "tls",
                   "allowedListeners", "defaultScope"}),
    )  # fmt: skip
    if spec is None or meta is None:
        return Parsed(None, tuple(ctx.problems))
    class_name = spec.text("gatewayClassName")
    if (why := dns1123_subdomain(class_name)) is not None:
        ctx.add(invalid("spec.gatewayClassName", class_name, why))
    listeners = parse_listeners(spec)
    addresses = []
    for a in spec.objs("addresses", frozenset({"type", "value"})):
        addresses.append((a.text("type") or "IPAddress", a.text("value")))
    client_cert = None
    tls = spec.obj("tls", frozenset({"backend", "frontend"}))
    backend = tls.obj("backend", frozenset({"clientCertificateRef"})) if tls else None
    ref = backend.obj("clientCertificateRef", _REF_KEYS) if backend else None
    if ref is not None:
        client_cert = parse_reference(ref, "Secret")
    frontend = parse_frontend(tls)
    sets_from, sets_selector = allowed_listeners(spec)
    infrastructure = spec.obj(
        "infrastructure", frozenset({"labels", "annotations", "parametersRef"})
    )
    params = infrastructure.obj("parametersRef", _PARAMS_KEYS) if infrastructure else None
    if ctx.problems:
        return Parsed(None, tuple(ctx.problems))
    gateway = Gateway(
        meta, class_name, tuple(listeners), tuple(addresses), client_cert, frontend,
        sets_from, sets_selector, parse_reference(params, "") if params else None,
    )  # fmt: skip
    return Parsed(gateway, ())


def parse_listeners(spec: Obj) -> list[Listener]:
    """``spec.listeners`` of a Gateway or a ListenerSet, with the CRDs' rules on
    the list: 1 to 64 items, names unique, and port, protocol and hostname
    together unique."""
    ctx = spec.ctx
    listeners = [parse_listener(o) for o in spec.objs("listeners", LISTENER_KEYS)]
    if not listeners:
        ctx.add(required("spec.listeners", "must have at least one listener"))
    elif len(listeners) > 64:
        ctx.add(invalid("spec.listeners", len(listeners), "must have at most 64 items"))
    names: set[str] = set()
    combos: set[tuple[int, str, str | None]] = set()
    for i, listener in enumerate(listeners):
        if listener.name in names:
            ctx.add(duplicate(f"spec.listeners[{i}].name", listener.name))
        names.add(listener.name)
        combo = (listener.port, listener.protocol, listener.hostname)
        if combo in combos:
            ctx.add(duplicate(f"spec.listeners[{i}]", "port, protocol and hostname"))
        combos.add(combo)
    return listeners


def parse_listener(o: Obj) -> Listener:
    """A Gateway's listener, or a ListenerSet's (their fields are the same)."""
    ctx = o.ctx
    name = o.text("name")
    if len(name) > 253 or not _SECTION_NAME_RE.fullmatch(name):
        ctx.add(invalid(o.at("name"), name, "must be a lower case RFC 1123 subdomain"))
    hostname = o.text("hostname") or None
    if hostname is not None and (len(hostname) > 253 or not HOSTNAME_RE.fullmatch(hostname)):
        ctx.add(invalid(o.at("hostname"), hostname, "must be a lower case hostname"))
    port = o.integer("port")
    if port is None or not 1 <= port <= 65535:
        ctx.add(invalid(o.at("port"), port, "must be between 1 and 65535, inclusive"))
    protocol = o.text("protocol")
    if len(protocol) > 255 or not _PROTOCOL_RE.fullmatch(protocol):
        ctx.add(
            invalid(
                o.at("protocol"),
                protocol,
                "must be a protocol name or a domain-prefixed one",
            )
        )
    tls_mode, certificates = None, []
    if (
        tls := o.obj("tls", frozenset({"mode", "certificateRefs", "options", "frontendValidation"}))
    ) is not None:
        tls_mode = tls.text("mode") or "Terminate"
        if tls_mode not in ("Terminate", "Passthrough"):
            ctx.add(invalid(tls.at("mode"), tls_mode, "must be Terminate or Passthrough"))
        for ref in tls.objs("certificateRefs", frozenset({"group", "kind", "name", "namespace"})):
            certificates.append(parse_reference(ref, default_kind="Secret"))
    if protocol in ("HTTPS", "TLS") and tls is None and protocol == "HTTPS":
        ctx.add(required(o.at("tls"), "tls must be set for protocols ['HTTPS', 'TLS']"))
    if protocol in ("HTTP", "TCP", "UDP") and tls is not None:
        ctx.add(
            invalid(
                o.at("tls"), "tls", "tls must not be specified for protocols ['HTTP', 'TCP', 'UDP']"
            )
        )
    namespaces_from, selector, kinds = "Same", None, None
    if (allowed := o.obj("allowedRoutes", frozenset({"namespaces", "kinds"}))) is not None:
        if (ns := allowed.obj("namespaces", frozenset({"from", "selector"}))) is not None:
            namespaces_from = ns.text("from") or "Same"
            if namespaces_from not in ("All", "Same", "Selector"):
                ctx.add(invalid(ns.at("from"), namespaces_from, "must be All, Same or Selector"))
            raw_selector = ns.raw.get("selector")
            selector = raw_selector if isinstance(raw_selector, Mapping) else None
            if namespaces_from == "Selector" and selector is None:
                ctx.add(required(ns.at("selector"), "selector must be set when from is Selector"))
        if allowed.has("kinds"):
            kinds = tuple(
                RouteKind(k.text("group") if k.has("group") else GROUP, k.text("kind"))
                for k in allowed.objs("kinds", frozenset({"group", "kind"}))
            )
    return Listener(
        name, hostname, port or 0, protocol, tls_mode, tuple(certificates),
        namespaces_from, selector, kinds,
    )  # fmt: skip


# ---- HTTPRoute ----------------------------------------------------------------------


@dataclass(frozen=True)
class ParentRef:
    group: str
    kind: str
    namespace: str | None
    name: str
    section_name: str | None
    port: int | None


@dataclass(frozen=True)
class ValueMatch:
    """A header or query parameter match: Exact or RegularExpression."""

    type: str
    name: str
    value: str


@dataclass(frozen=True)
class Match:
    path_type: str  # Exact | PathPrefix | RegularExpression
    path: str
    headers: tuple[ValueMatch, ...] = ()
    query: tuple[ValueMatch, ...] = ()
    method: str | None = None


@dataclass(frozen=True)
class BackendRef:
    ref: ObjectReference
    port: int | None
    weight: int
    filters: tuple[Filter, ...] = ()


@dataclass(frozen=True)
class Rule:
    matches: tuple[Match, ...]
    filters: tuple[Filter, ...]
    backends: tuple[BackendRef, ...]
    name: str | None = None
    # timeouts.request and timeouts.backendRequest in seconds (0: disabled,
    # None: not set).
    request_timeout: float | None = None
    backend_timeout: float | None = None


@dataclass(frozen=True)
class HTTPRoute:
    kind: ClassVar[str] = "HTTPRoute"
    meta: Meta
    parents: tuple[ParentRef, ...]
    hostnames: tuple[str, ...]
    rules: tuple[Rule, ...] = field(default=())


_RULE_KEYS = frozenset(
    {"name", "matches", "filters", "backendRefs", "timeouts", "retry", "sessionPersistence"}
)
_MATCH_KEYS = frozenset({"path", "headers", "queryParams", "method"})


_ROUTE_SPEC_KEYS = frozenset({"parentRefs", "hostnames", "rules", "useDefaultGateways"})


def route_root(obj: Mapping[str, Any], ctx: Context) -> tuple[Meta | None, Obj | None]:
    """An HTTPRoute's or GRPCRoute's metadata and spec (None: unusable)."""
    return parse_object_meta(obj, ctx), Obj.root(ctx, obj.get("spec"), "spec", _ROUTE_SPEC_KEYS)


def parse_http_route(obj: Mapping[str, Any]) -> Parsed[HTTPRoute]:
    ctx = Context()
    meta, spec = route_root(obj, ctx)
    if spec is None or meta is None:
        return Parsed(None, tuple(ctx.problems))
    parents = parse_parents(spec)
    hostnames = parse_hostnames(spec)
    rules = [_rule(r) for r in spec.objs("rules", _RULE_KEYS)]
    if not rules:  # the CRD's default: one rule matching every request, no backends
        rules = [Rule((Match("PathPrefix", "/"),), (), ())]
    if ctx.problems:
        return Parsed(None, tuple(ctx.problems))
    return Parsed(HTTPRoute(meta, parents, hostnames, tuple(rules)), ())


def parse_parents(spec: Obj) -> tuple[ParentRef, ...]:
    """A route's ``spec.parentRefs`` (every route kind has the same)."""
    parents = []
    for p in spec.objs(
        "parentRefs", frozenset({"group", "kind", "namespace", "name", "sectionName", "port"})
    ):
        ref = parse_reference(p, default_kind="Gateway", default_group=GROUP)
        section = p.text("sectionName") or None
        if section is not None and not _SECTION_NAME_RE.fullmatch(section):
            spec.ctx.add(
                invalid(p.at("sectionName"), section, "must be a lower case RFC 1123 subdomain")
            )
        port = p.integer("port")
        if port is not None and not 1 <= port <= 65535:
            spec.ctx.add(invalid(p.at("port"), port, "must be between 1 and 65535, inclusive"))
        parents.append(ParentRef(ref.group, ref.kind, ref.namespace, ref.name, section, port))
    if len(parents) > 32:
        spec.ctx.add(invalid("spec.parentRefs", len(parents), "must have at most 32 items"))
    return tuple(parents)


def parse_hostnames(spec: Obj) -> tuple[str, ...]:
    """A route's ``spec.hostnames``: lower case names, a leading ``*.`` allowed."""
    hostnames = []
    for where, h in spec.str_items("hostnames") or []:
        if len(h) > 253 or not HOSTNAME_RE.fullmatch(h):
            spec.ctx.add(invalid(where, h, "must be a lower case hostname"))
        hostnames.append(h)
    return tuple(hostnames)


def parse_backend_ref(b: Obj) -> tuple[ObjectReference, int | None, int]:
    """A backendRef's referent, port and weight (the CRDs' defaults: a
    Service, weight 1)."""
    ref = parse_reference(b, default_kind="Service")
    port = b.integer("port")
    if ref.group == "" and ref.kind == "Service" and port is None:
        b.ctx.add(
            required(b.at("port"), "must be specified when the referent is a Kubernetes Service")
        )
    weight = b.integer("weight")
    weight = 1 if weight is None else weight
    if not 0 <= weight <= MAX_WEIGHT:
        b.ctx.add(invalid(b.at("weight"), weight, f"must be between 0 and {MAX_WEIGHT}"))
    return ref, port, weight


def _rule(o: Obj) -> Rule:
    matches = tuple(_match(m) for m in o.objs("matches", _MATCH_KEYS)) or (
        Match("PathPrefix", "/"),
    )
    filters = tuple(parse_filter(f) for f in o.objs("filters", FILTER_KEYS))
    check_filters(o, filters)
    backends = []
    for b in o.objs(
        "backendRefs",
        frozenset({"group", "kind", "name", "namespace", "port", "weight", "filters"}),
    ):
        ref, port, weight = parse_backend_ref(b)
        backend_filters = tuple(parse_filter(f) for f in b.objs("filters", FILTER_KEYS))
        backends.append(BackendRef(ref, port, weight, backend_filters))
    request, backend = None, None
    if (t := o.obj("timeouts", frozenset({"request", "backendRequest"}))) is not None:
        request = parse_duration(t, "request")
        backend = parse_duration(t, "backendRequest")
        if request and backend and backend > request:
            o.ctx.add(
                invalid(
                    t.at("backendRequest"),
                    t.text("backendRequest"),
                    "backendRequest timeout cannot be longer than request timeout",
                )
            )
    return Rule(matches, filters, tuple(backends), o.text("name") or None, request, backend)


def _match(o: Obj) -> Match:
    ctx = o.ctx
    path_type, path = "PathPrefix", "/"
    if (p := o.obj("path", frozenset({"type", "value"}))) is not None:
        path_type = p.text("type") or "PathPrefix"
        path = p.text("value") if p.has("value") else "/"
        if path_type not in ("Exact", "PathPrefix", "RegularExpression"):
            ctx.add(
                invalid(p.at("type"), path_type, "must be Exact, PathPrefix or RegularExpression")
            )
        elif path_type != "RegularExpression":
            if not path.startswith("/"):
                ctx.add(
                    invalid(
                        p.at("value"), path, "value must be an absolute path and start with '/'"
                    )
                )
            elif not PATH_RE.fullmatch(path):
                ctx.add(invalid(p.at("value"), path, "must only contain valid characters"))
            for bad in ("//", "/./", "/../", "%2f", "%2F", "#"):
                if bad in path:
                    ctx.add(invalid(p.at("value"), path, f"must not contain '{bad}'"))
            if path.endswith(("/..", "/.")):
                ctx.add(invalid(p.at("value"), path, "must not end with '/..' or '/.'"))
        elif len(path) > 1024 or not path:
            ctx.add(invalid(p.at("value"), path, "must be 1 to 1024 characters"))
        elif (error := _whole_path_error(path)) is not None:
            ctx.add(invalid(p.at("value"), path, f"must be a valid regular expression: {error}"))
    headers = _value_matches(o, "headers", header=True)
    query = _value_matches(o, "queryParams", header=False)
    method = o.text("method") or None
    if method is not None and method not in _METHODS:
        ctx.add(invalid(o.at("method"), method, f"must be one of {', '.join(_METHODS)}"))
    return Match(path_type, path, headers, query, method)


def _value_matches(o: Obj, key: str, header: bool) -> tuple[ValueMatch, ...]:
    out = []
    seen: set[str] = set()
    for m in o.objs(key, frozenset({"type", "name", "value"})):
        kind = m.text("type") or "Exact"
        if kind not in ("Exact", "RegularExpression"):
            o.ctx.add(invalid(m.at("type"), kind, "must be Exact or RegularExpression"))
        name = m.text("name")
        if not name or len(name) > 256 or not HEADER_NAME_RE.fullmatch(name):
            o.ctx.add(invalid(m.at("name"), name, "must be a valid HTTP header name"))
        value = m.text("value")
        if not value or len(value) > (4096 if header else 1024):
            o.ctx.add(invalid(m.at("value"), value, "must be 1 to 4096 characters"))
        elif kind == "RegularExpression" and (error := pcre_error(value)) is not None:
            o.ctx.add(invalid(m.at("value"), value, f"must be a valid regular expression: {error}"))
        # Header names compare case-insensitively, query parameter names exactly.
        folded = name.lower() if header else name
        if folded in seen:
            o.ctx.add(duplicate(m.at("name"), name))
        seen.add(folded)
        out.append(ValueMatch(kind, name, value))
    if len(out) > 16:
        o.ctx.add(invalid(o.at(key), len(out), "must have at most 16 items"))
    return tuple(out)


def _whole_path_error(path: str) -> str | None:
    """The data plane matches a RegularExpression path whole, as
    ``^(?:path)$``: a pattern valid alone can still break that (``\\Q/a``
    quotes the closing parenthesis), so both forms are checked."""
    if (error := pcre_error(path)) is not None:
        return error
    if (error := pcre_error(f"^(?:{path})$")) is not None:
        return f"{error} (matched whole, as ^(?:{path})$)"
    return None
