"""gateway.networking.k8s.io/v1 GatewayClass, Gateway, HTTPRoute and
(v1beta1) ReferenceGrant: typed views with the standard channel's validation.

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
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ferryman.resources.gateway_cors import Cors, parse_cors
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
from ferryman.resources.validation import dns1123_subdomain

GROUP = "gateway.networking.k8s.io"
CONTROLLER_NAME = "ferryman.io/gateway-controller"

# The CRDs' patterns (gateway-api v1.6 apis/v1/shared_types.go).
_HOSTNAME_RE = re.compile(
    r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_SECTION_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_CONTROLLER_RE = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/[A-Za-z0-9\/\-._~%!$&'()*+,;=:]+$"
)
_HEADER_NAME_RE = re.compile(r"^[A-Za-z0-9!#$%&'*+\-.^_`|~]+$")
_KIND_RE = re.compile(r"^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$")
_GROUP_RE = re.compile(r"^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# A path as HTTPRoute's CEL rules allow it for Exact and PathPrefix.
_PATH_RE = re.compile(r"^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|%[0-9a-fA-F]{2})+$")
# The CRD's pattern: any such name is valid (an unknown one is reported in the
# listener's status, UnsupportedProtocol), not only the five the spec names.
_PROTOCOL_RE = re.compile(
    r"^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$"
    r"|[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/[A-Za-z0-9]+$"
)
_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH")
_REDIRECT_CODES = (301, 302, 303, 307, 308)
MAX_WEIGHT = 1_000_000


# ---- GatewayClass -------------------------------------------------------------------


@dataclass(frozen=True)
class GatewayClass:
    meta: Meta
    controller: str


def parse_gateway_class(obj: Mapping[str, Any]) -> Parsed[GatewayClass]:
    ctx = Context()
    meta = parse_object_meta(obj, ctx)
    spec = Obj.root(
        ctx, obj.get("spec"), "spec", frozenset({"controllerName", "parametersRef", "description"})
    )
    controller = spec.text("controllerName") if spec else ""
    if spec is not None:
        if not controller:
            ctx.add(required("spec.controllerName"))
        elif len(controller) > 253 or not _CONTROLLER_RE.fullmatch(controller):
            ctx.add(invalid("spec.controllerName", controller, "must be a domain-prefixed path"))
    if meta is None or ctx.problems:
        return Parsed(None, tuple(ctx.problems))
    return Parsed(GatewayClass(meta, controller), ())


# ---- Gateway ------------------------------------------------------------------------


@dataclass(frozen=True)
class ObjectReference:
    """A certificateRef or backendRef: group "" is the core group."""

    group: str
    kind: str
    name: str
    namespace: str | None  # None: the referring object's namespace


@dataclass(frozen=True)
class RouteKind:
    group: str
    kind: str


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


@dataclass(frozen=True)
class Gateway:
    meta: Meta
    class_name: str
    listeners: tuple[Listener, ...]
    addresses: tuple[tuple[str, str], ...]  # (type, value)


_LISTENER_KEYS = frozenset({"name", "hostname", "port", "protocol", "tls", "allowedRoutes"})


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
    listeners = [_listener(o) for o in spec.objs("listeners", _LISTENER_KEYS)]
    if not listeners:
        ctx.add(required("spec.listeners", "must have at least one listener"))
    elif len(listeners) > 64:
        ctx.add(invalid("spec.listeners", len(listeners), "must have at most 64 items"))
    seen: set[str] = set()
    for i, listener in enumerate(listeners):
        if listener.name in seen:
            ctx.add(duplicate(f"spec.listeners[{i}].name", listener.name))
        seen.add(listener.name)
    # The CRD's rule: port, protocol and hostname together unique.
    combos: set[tuple[int, str, str | None]] = set()
    for i, listener in enumerate(listeners):
        combo = (listener.port, listener.protocol, listener.hostname)
        if combo in combos:
            ctx.add(duplicate(f"spec.listeners[{i}]", "port, protocol and hostname"))
        combos.add(combo)
    addresses = []
    for a in spec.objs("addresses", frozenset({"type", "value"})):
        addresses.append((a.text("type") or "IPAddress", a.text("value")))
    if ctx.problems:
        return Parsed(None, tuple(ctx.problems))
    return Parsed(Gateway(meta, class_name, tuple(listeners), tuple(addresses)), ())


def _listener(o: Obj) -> Listener:
    ctx = o.ctx
    name = o.text("name")
    if len(name) > 253 or not _SECTION_NAME_RE.fullmatch(name):
        ctx.add(invalid(o.at("name"), name, "must be a lower case RFC 1123 subdomain"))
    hostname = o.text("hostname") or None
    if hostname is not None and (len(hostname) > 253 or not _HOSTNAME_RE.fullmatch(hostname)):
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
            certificates.append(_reference(ref, default_kind="Secret"))
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


def _reference(o: Obj, default_kind: str, default_group: str = "") -> ObjectReference:
    group = o.text("group") if o.has("group") else default_group
    kind = o.text("kind") if o.has("kind") else default_kind
    name = o.text("name")
    if not name or len(name) > 253:
        o.ctx.add(invalid(o.at("name"), name, "must be 1 to 253 characters"))
    if not _GROUP_RE.fullmatch(group):
        o.ctx.add(invalid(o.at("group"), group, "must be a DNS subdomain or empty"))
    if not _KIND_RE.fullmatch(kind):
        o.ctx.add(invalid(o.at("kind"), kind, "must be a kind name"))
    namespace = o.text("namespace") or None
    return ObjectReference(group, kind, name, namespace)


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
class HeaderChanges:
    set: tuple[tuple[str, str], ...] = ()
    add: tuple[tuple[str, str], ...] = ()
    remove: tuple[str, ...] = ()


@dataclass(frozen=True)
class PathModifier:
    type: str  # ReplaceFullPath | ReplacePrefixMatch
    value: str


@dataclass(frozen=True)
class Filter:
    """One filter: ``type`` and the field of that type (others None)."""

    type: str
    headers: HeaderChanges | None = None  # Request/ResponseHeaderModifier
    scheme: str | None = None  # RequestRedirect
    hostname: str | None = None  # RequestRedirect, URLRewrite
    path: PathModifier | None = None  # RequestRedirect, URLRewrite
    port: int | None = None  # RequestRedirect
    status_code: int | None = None  # RequestRedirect
    backend: ObjectReference | None = None  # RequestMirror
    mirror_port: int | None = None
    mirror_percent: float = 100.0  # percent or fraction, as a percentage
    cors: Cors | None = None  # CORS


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
    meta: Meta
    parents: tuple[ParentRef, ...]
    hostnames: tuple[str, ...]
    rules: tuple[Rule, ...] = field(default=())


_RULE_KEYS = frozenset(
    {"name", "matches", "filters", "backendRefs", "timeouts", "retry", "sessionPersistence"}
)
_MATCH_KEYS = frozenset({"path", "headers", "queryParams", "method"})
_FILTER_KEYS = frozenset(
    {"type", "requestHeaderModifier", "responseHeaderModifier", "requestRedirect",
     "urlRewrite", "requestMirror", "extensionRef", "cors", "externalAuth"}
)  # fmt: skip


def parse_http_route(obj: Mapping[str, Any]) -> Parsed[HTTPRoute]:
    ctx = Context()
    meta = parse_object_meta(obj, ctx)
    spec = Obj.root(
        ctx,
        obj.get("spec"),
        "spec",
        frozenset({"parentRefs", "hostnames", "rules", "useDefaultGateways"}),
    )
    if spec is None or meta is None:
        return Parsed(None, tuple(ctx.problems))
    parents = []
    for p in spec.objs(
        "parentRefs", frozenset({"group", "kind", "namespace", "name", "sectionName", "port"})
    ):
        ref = _reference(p, default_kind="Gateway", default_group=GROUP)
        section = p.text("sectionName") or None
        if section is not None and not _SECTION_NAME_RE.fullmatch(section):
            ctx.add(
                invalid(p.at("sectionName"), section, "must be a lower case RFC 1123 subdomain")
            )
        port = p.integer("port")
        if port is not None and not 1 <= port <= 65535:
            ctx.add(invalid(p.at("port"), port, "must be between 1 and 65535, inclusive"))
        parents.append(ParentRef(ref.group, ref.kind, ref.namespace, ref.name, section, port))
    if len(parents) > 32:
        ctx.add(invalid("spec.parentRefs", len(parents), "must have at most 32 items"))
    hostnames = []
    for where, h in spec.str_items("hostnames") or []:
        if len(h) > 253 or not _HOSTNAME_RE.fullmatch(h):
            ctx.add(invalid(where, h, "must be a lower case hostname"))
        hostnames.append(h)
    rules = [_rule(r) for r in spec.objs("rules", _RULE_KEYS)]
    if not rules:  # the CRD's default: one rule matching every request, no backends
        rules = [Rule((Match("PathPrefix", "/"),), (), ())]
    if ctx.problems:
        return Parsed(None, tuple(ctx.problems))
    return Parsed(HTTPRoute(meta, tuple(parents), tuple(hostnames), tuple(rules)), ())


def _rule(o: Obj) -> Rule:
    matches = tuple(_match(m) for m in o.objs("matches", _MATCH_KEYS)) or (
        Match("PathPrefix", "/"),
    )
    filters = tuple(_filter(f) for f in o.objs("filters", _FILTER_KEYS))
    _check_filters(o, filters)
    backends = []
    for b in o.objs(
        "backendRefs",
        frozenset({"group", "kind", "name", "namespace", "port", "weight", "filters"}),
    ):
        ref = _reference(b, default_kind="Service")
        port = b.integer("port")
        if ref.group == "" and ref.kind == "Service" and port is None:
            o.ctx.add(
                required(
                    b.at("port"), "must be specified when the referent is a Kubernetes Service"
                )
            )
        weight = b.integer("weight")
        weight = 1 if weight is None else weight
        if not 0 <= weight <= MAX_WEIGHT:
            o.ctx.add(invalid(b.at("weight"), weight, f"must be between 0 and {MAX_WEIGHT}"))
        backend_filters = tuple(_filter(f) for f in b.objs("filters", _FILTER_KEYS))
        backends.append(BackendRef(ref, port, weight, backend_filters))
    request, backend = None, None
    if (t := o.obj("timeouts", frozenset({"request", "backendRequest"}))) is not None:
        request = _duration(t, "request")
        backend = _duration(t, "backendRequest")
        if request and backend and backend > request:
            o.ctx.add(
                invalid(
                    t.at("backendRequest"),
                    t.text("backendRequest"),
                    "backendRequest timeout cannot be longer than request timeout",
                )
            )
    return Rule(matches, filters, tuple(backends), o.text("name") or None, request, backend)


# GEP-2257's Duration: 1 to 4 numbers of up to 5 digits, each with its unit.
_DURATION_RE = re.compile(r"^([0-9]{1,5}(h|m|s|ms)){1,4}$")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def _duration(o: Obj, key: str) -> float | None:
    """A Duration field in seconds (None when absent)."""
    if not o.has(key):
        return None
    text = o.text(key)
    if not _DURATION_RE.fullmatch(text):
        o.ctx.add(invalid(o.at(key), text, "must be a Gateway API Duration such as 500ms or 1h2m"))
        return None
    return sum(float(n) * _UNITS[u] for n, u in re.findall(r"([0-9]+)(ms|h|m|s)", text))


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
            elif not _PATH_RE.fullmatch(path):
                ctx.add(invalid(p.at("value"), path, "must only contain valid characters"))
            for bad in ("//", "/./", "/../", "%2f", "%2F", "#"):
                if bad in path:
                    ctx.add(invalid(p.at("value"), path, f"must not contain '{bad}'"))
            if path.endswith(("/..", "/.")):
                ctx.add(invalid(p.at("value"), path, "must not end with '/..' or '/.'"))
        elif len(path) > 1024 or not path:
            ctx.add(invalid(p.at("value"), path, "must be 1 to 1024 characters"))
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
        if not name or len(name) > 256 or not _HEADER_NAME_RE.fullmatch(name):
            o.ctx.add(invalid(m.at("name"), name, "must be a valid HTTP header name"))
        value = m.text("value")
        if not value or len(value) > (4096 if header else 1024):
            o.ctx.add(invalid(m.at("value"), value, "must be 1 to 4096 characters"))
        # Header names compare case-insensitively, query parameter names exactly.
        folded = name.lower() if header else name
        if folded in seen:
            o.ctx.add(duplicate(m.at("name"), name))
        seen.add(folded)
        out.append(ValueMatch(kind, name, value))
    if len(out) > 16:
        o.ctx.add(invalid(o.at(key), len(out), "must have at most 16 items"))
    return tuple(out)


def _header_changes(o: Obj) -> HeaderChanges:
    def pairs(key: str) -> tuple[tuple[str, str], ...]:
        out = []
        for h in o.objs(key, frozenset({"name", "value"})):
            name, value = h.text("name"), h.text("value")
            if not _HEADER_NAME_RE.fullmatch(name):
                o.ctx.add(invalid(h.at("name"), name, "must be a valid HTTP header name"))
            if any(c in value for c in "\r\n\0"):
                o.ctx.add(invalid(h.at("value"), value, "must not contain line breaks"))
            out.append((name, value))
        return tuple(out)

    remove = o.strs("remove") or ()
    for name in remove:
        if not _HEADER_NAME_RE.fullmatch(name):
            o.ctx.add(invalid(o.at("remove"), name, "must be a valid HTTP header name"))
    return HeaderChanges(pairs("set"), pairs("add"), tuple(remove))


def _path_modifier(o: Obj | None) -> PathModifier | None:
    if o is None:
        return None
    kind = o.text("type")
    if kind == "ReplaceFullPath":
        value = o.text("replaceFullPath")
    elif kind == "ReplacePrefixMatch":
        value = o.text("replacePrefixMatch")
    else:
        o.ctx.add(invalid(o.at("type"), kind, "must be ReplaceFullPath or ReplacePrefixMatch"))
        return None
    if not value.startswith("/") or not _PATH_RE.fullmatch(value):
        o.ctx.add(invalid(o.at(kind[0].lower() + kind[1:]), value, "must be an absolute path"))
    return PathModifier(kind, value)


_PATH_KEYS = frozenset({"type", "replaceFullPath", "replacePrefixMatch"})


def _filter(o: Obj) -> Filter:
    ctx = o.ctx
    kind = o.text("type")
    if kind in ("RequestHeaderModifier", "ResponseHeaderModifier"):
        key = kind[0].lower() + kind[1:]
        h = o.obj(key, frozenset({"set", "add", "remove"}))
        if h is None:
            ctx.add(required(o.at(key), f"filter.{key} must be specified for {kind} filter.type"))
        return Filter(kind, headers=_header_changes(h) if h else HeaderChanges())
    if kind == "RequestRedirect":
        r = o.obj(
            "requestRedirect", frozenset({"scheme", "hostname", "path", "port", "statusCode"})
        )
        if r is None:
            ctx.add(required(o.at("requestRedirect")))
            return Filter(kind)
        scheme = r.text("scheme") or None
        if scheme not in (None, "http", "https"):
            ctx.add(invalid(r.at("scheme"), scheme, "must be http or https"))
        hostname = r.text("hostname") or None
        if hostname is not None and not _HOSTNAME_RE.fullmatch(hostname):
            ctx.add(invalid(r.at("hostname"), hostname, "must be a lower case hostname"))
        port = r.integer("port")
        if port is not None and not 1 <= port <= 65535:
            ctx.add(invalid(r.at("port"), port, "must be between 1 and 65535, inclusive"))
        code = r.integer("statusCode")
        code = 302 if code is None else code
        if code not in _REDIRECT_CODES:
            ctx.add(invalid(r.at("statusCode"), code, "must be 301, 302, 303, 307 or 308"))
        path = _path_modifier(r.obj("path", _PATH_KEYS))
        return Filter(
            kind, scheme=scheme, hostname=hostname, path=path, port=port, status_code=code
        )
    if kind == "URLRewrite":
        u = o.obj("urlRewrite", frozenset({"hostname", "path"}))
        if u is None:
            ctx.add(required(o.at("urlRewrite")))
            return Filter(kind)
        hostname = u.text("hostname") or None
        if hostname is not None and not _HOSTNAME_RE.fullmatch(hostname):
            ctx.add(invalid(u.at("hostname"), hostname, "must be a lower case hostname"))
        return Filter(kind, hostname=hostname, path=_path_modifier(u.obj("path", _PATH_KEYS)))
    if kind == "RequestMirror":
        m = o.obj("requestMirror", frozenset({"backendRef", "percent", "fraction"}))
        ref = (
            m.obj("backendRef", frozenset({"group", "kind", "name", "namespace", "port"}))
            if m
            else None
        )
        if ref is None or m is None:
            ctx.add(required(o.at("requestMirror.backendRef")))
            return Filter(kind)
        return Filter(
            kind,
            backend=_reference(ref, default_kind="Service"),
            mirror_port=ref.integer("port"),
            mirror_percent=_mirror_percent(m),
        )
    if kind == "CORS":
        return Filter(kind, cors=parse_cors(o))
    if kind in ("ExtensionRef", "ExternalAuth"):
        return Filter(kind)  # valid, not implemented: the route's status says so
    ctx.add(invalid(o.at("type"), kind, "must be a filter type of the specification"))
    return Filter(kind)


def _mirror_percent(m: Obj) -> float:
    """RequestMirror's percent (0-100) or fraction (numerator/denominator,
    denominator 100 by default), as a percentage; 100 without either."""
    ctx = m.ctx
    percent = m.integer("percent")
    fraction = m.obj("fraction", frozenset({"numerator", "denominator"}))
    if percent is not None and fraction is not None:
        ctx.add(invalid(m.at("percent"), percent, "only one of percent or fraction may be set"))
    if percent is not None:
        if not 0 <= percent <= 100:
            ctx.add(invalid(m.at("percent"), percent, "must be between 0 and 100, inclusive"))
        return float(percent)
    if fraction is not None:
        numerator = fraction.integer("numerator") or 0
        denominator = fraction.integer("denominator") or 100
        if denominator < 1 or not 0 <= numerator <= denominator:
            ctx.add(
                invalid(
                    m.at("fraction"),
                    f"{numerator}/{denominator}",
                    "numerator must be between 0 and the denominator, which must be at least 1",
                )
            )
            return 0.0
        return 100.0 * numerator / denominator
    return 100.0


def _check_filters(o: Obj, filters: tuple[Filter, ...]) -> None:
    """The CRD's rules between a rule's filters."""
    kinds = [f.type for f in filters]
    for once in (
        "RequestHeaderModifier",
        "ResponseHeaderModifier",
        "RequestRedirect",
        "URLRewrite",
    ):
        if kinds.count(once) > 1:
            o.ctx.add(invalid(o.at("filters"), once, f"{once} filter cannot be repeated"))
    if "RequestRedirect" in kinds and "URLRewrite" in kinds:
        o.ctx.add(
            invalid(
                o.at("filters"),
                "RequestRedirect",
                "may specify either httpRouteFilterRequestRedirect or "
                "httpRouteFilterRequestRewrite, but not both",
            )
        )
    if len(filters) > 16:
        o.ctx.add(invalid(o.at("filters"), len(filters), "must have at most 16 items"))


# ---- ReferenceGrant -----------------------------------------------------------------


@dataclass(frozen=True)
class GrantFrom:
    group: str
    kind: str
    namespace: str


@dataclass(frozen=True)
class GrantTo:
    group: str
    kind: str
    name: str | None  # None: every object of that kind


@dataclass(frozen=True)
class ReferenceGrant:
    meta: Meta
    sources: tuple[GrantFrom, ...]
    targets: tuple[GrantTo, ...]

    def allows(
        self, group: str, kind: str, namespace: str, to_group: str, to_kind: str, name: str
    ) -> bool:
        """Whether an object of (group, kind) in ``namespace`` may refer to the
        (to_group, to_kind) object ``name`` in this grant's namespace."""
        return any(f == GrantFrom(group, kind, namespace) for f in self.sources) and any(
            (t.group, t.kind) == (to_group, to_kind) and t.name in (None, name)
            for t in self.targets
        )


def parse_reference_grant(obj: Mapping[str, Any]) -> Parsed[ReferenceGrant]:
    ctx = Context()
    meta = parse_object_meta(obj, ctx)
    spec = Obj.root(ctx, obj.get("spec"), "spec", frozenset({"from", "to"}))
    if spec is None or meta is None:
        return Parsed(None, tuple(ctx.problems))
    sources = tuple(
        GrantFrom(f.text("group"), f.text("kind"), f.text("namespace"))
        for f in spec.objs("from", frozenset({"group", "kind", "namespace"}))
    )
    targets = tuple(
        GrantTo(t.text("group"), t.text("kind"), t.text("name") or None)
        for t in spec.objs("to", frozenset({"group", "kind", "name"}))
    )
    if not sources:
        ctx.add(required("spec.from"))
    if not targets:
        ctx.add(required("spec.to"))
    if ctx.problems:
        return Parsed(None, tuple(ctx.problems))
    return Parsed(ReferenceGrant(meta, sources, targets), ())
