"""gateway.networking.k8s.io/v1 GRPCRoute: a typed view with the standard
channel's validation (v1.6's CRD and CEL rules), as an HTTPRoute the route
engine already serves.

A gRPC call is an HTTP/2 POST to ``/<service>/<method>``, so a method match is
a path match: service and method ``Exact`` is the exact path, a service alone
the prefix ``/<service>`` (the router compares prefixes element by element, so
``/a.B`` never takes ``/a.BC/M``), a method alone and ``RegularExpression``
a regular expression over the whole path (the router anchors it), each part
that is not given matching one path element. Headers match as an HTTPRoute's.
The rules become ``gateway_api.Rule``s whose matches are ``GRPCMatch``es:
the attachment orders them by the GRPCRoute precedence (service characters,
then method characters, then header matches), and the records send them to
the gRPC location (``records/routes.py``).

Filters are an HTTPRoute's of the same names (``filters.parse_filter``); the
CRD allows RequestHeaderModifier, ResponseHeaderModifier, RequestMirror and
ExtensionRef. Which of them are served is the attachment's to say.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ferryman.kinds.gateway.parse.fields import HEADER_NAME_RE
from ferryman.kinds.gateway.parse.filters import FILTER_KEYS, Filter, check_filters, parse_filter
from ferryman.kinds.gateway.parse.gateway_api import (
    BackendRef,
    Match,
    ParentRef,
    Rule,
    ValueMatch,
    parse_backend_ref,
    parse_hostnames,
    parse_parents,
    route_root,
)
from ferryman.resources.meta import Meta
from ferryman.resources.nic_fields import (
    Context,
    Obj,
    Parsed,
    duplicate,
    invalid,
)
from ferryman.resources.pcre import pcre_error

# The CRD's CEL patterns for Exact matches (grpcroute_types.go).
SERVICE_RE = re.compile(r"^\.?[a-z_][a-z_0-9]*(\.[a-z_][a-z_0-9]*)*$", re.IGNORECASE)
METHOD_RE = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*$")
# One path element: what a part the match leaves out stands for.
_ELEMENT = "[^/]+"
_FILTER_TYPES = (
    "RequestHeaderModifier",
    "ResponseHeaderModifier",
    "RequestMirror",
    "ExtensionRef",
)
_RULE_KEYS = frozenset({"name", "matches", "filters", "backendRefs", "sessionPersistence"})
_BACKEND_KEYS = frozenset({"group", "kind", "name", "namespace", "port", "weight", "filters"})


@dataclass(frozen=True)
class GRPCMatch(Match):
    """A GRPCRoute match as the path match it is, with the service and method
    it names (for precedence: their lengths, "" when not given)."""

    service: str = ""
    grpc_method: str = ""


@dataclass(frozen=True)
class GRPCRoute:
    kind: ClassVar[str] = "GRPCRoute"
    meta: Meta
    parents: tuple[ParentRef, ...]
    hostnames: tuple[str, ...]
    rules: tuple[Rule, ...]


def parse_grpc_route(obj: Mapping[str, Any]) -> Parsed[GRPCRoute]:
    ctx = Context()
    meta, spec = route_root(obj, ctx)
    if spec is None or meta is None:
        return Parsed(None, tuple(ctx.problems))
    parents = parse_parents(spec)
    hostnames = parse_hostnames(spec)
    if len(hostnames) > 16:
        ctx.add(invalid("spec.hostnames", len(hostnames), "must have at most 16 items"))
    rules = [_rule(r) for r in spec.objs("rules", _RULE_KEYS)]
    if len(rules) > 16:
        ctx.add(invalid("spec.rules", len(rules), "must have at most 16 items"))
    if sum(len(r.matches) for r in rules) > 128:
        ctx.add(invalid("spec.rules", "matches", "the total number of matches must be <= 128"))
    names = [r.name for r in rules if r.name is not None]
    if len(set(names)) != len(names):
        ctx.add(duplicate("spec.rules", "name"))
    if not rules:  # no rules: every call, no backends (answered as one without)
        rules = [Rule((GRPCMatch("PathPrefix", "/"),), (), ())]
    if ctx.problems:
        return Parsed(None, tuple(ctx.problems))
    return Parsed(GRPCRoute(meta, parents, hostnames, tuple(rules)), ())


def _rule(o: Obj) -> Rule:
    raw_matches = o.objs("matches", frozenset({"method", "headers"}))
    if len(raw_matches) > 64:
        o.ctx.add(invalid(o.at("matches"), len(raw_matches), "must have at most 64 items"))
    matches = tuple(_match(m) for m in raw_matches) or (GRPCMatch("PathPrefix", "/"),)
    filters = tuple(parse_filter(f) for f in o.objs("filters", FILTER_KEYS))
    _check_types(o, filters)
    check_filters(o, filters)
    backends = []
    for b in o.objs("backendRefs", _BACKEND_KEYS):
        ref, port, weight = parse_backend_ref(b)
        own = tuple(parse_filter(f) for f in b.objs("filters", FILTER_KEYS))
        _check_types(b, own)
        backends.append(BackendRef(ref, port, weight, own))
    if len(backends) > 16:
        o.ctx.add(invalid(o.at("backendRefs"), len(backends), "must have at most 16 items"))
    return Rule(matches, filters, tuple(backends), o.text("name") or None)


def _check_types(o: Obj, filters: tuple[Filter, ...]) -> None:
    """The CRD's enum of a GRPCRoute filter's type (narrower than HTTPRoute's)."""
    for f in filters:
        if f.type not in _FILTER_TYPES:
            why = f"must be one of {', '.join(_FILTER_TYPES)}"
            o.ctx.add(invalid(o.at("filters"), f.type, why))


def _match(o: Obj) -> GRPCMatch:
    headers = _headers(o)
    m = o.obj("method", frozenset({"type", "service", "method"}))
    if m is None:
        return GRPCMatch("PathPrefix", "/", headers)
    kind = m.text("type") or "Exact"
    service, method = m.text("service"), m.text("method")
    if kind not in ("Exact", "RegularExpression"):
        o.ctx.add(invalid(m.at("type"), kind, "must be Exact or RegularExpression"))
        return GRPCMatch("PathPrefix", "/", headers)
    if not service and not method:
        o.ctx.add(invalid(o.at("method"), "", "one or both of 'service' or 'method' must be set"))
    for key, value in (("service", service), ("method", method)):
        if len(value) > 1024:
            o.ctx.add(invalid(m.at(key), value, "must be at most 1024 characters"))
    if kind == "Exact":
        if service and not SERVICE_RE.fullmatch(service):
            why = "service must only contain valid characters"
            o.ctx.add(invalid(m.at("service"), service, why))
        if method and not METHOD_RE.fullmatch(method):
            o.ctx.add(invalid(m.at("method"), method, "method must only contain valid characters"))
        if service and method:
            return GRPCMatch("Exact", f"/{service}/{method}", headers, (), None, service, method)
        if service:
            return GRPCMatch("PathPrefix", f"/{service}", headers, (), None, service, "")
        # Names are [A-Za-z_0-9] only: nothing to quote in the pattern.
        path = f"/{_ELEMENT}/{method}"
        return GRPCMatch("RegularExpression", path, headers, (), None, "", method)
    for key, value in (("service", service), ("method", method)):
        if value and (error := pcre_error(value)) is not None:
            o.ctx.add(invalid(m.at(key), value, f"must be a valid regular expression: {error}"))
    path = f"/(?:{service or _ELEMENT})/(?:{method or _ELEMENT})"
    if not o.ctx.problems and (error := pcre_error(f"^(?:{path})$")) is not None:
        o.ctx.add(invalid(o.at("method"), path, f"must be a valid regular expression: {error}"))
    return GRPCMatch("RegularExpression", path, headers, (), None, service, method)


def _headers(o: Obj) -> tuple[ValueMatch, ...]:
    out = []
    seen: set[str] = set()
    for h in o.objs("headers", frozenset({"type", "name", "value"})):
        kind = h.text("type") or "Exact"
        if kind not in ("Exact", "RegularExpression"):
            o.ctx.add(invalid(h.at("type"), kind, "must be Exact or RegularExpression"))
        name, value = h.text("name"), h.text("value")
        if not name or len(name) > 256 or not HEADER_NAME_RE.fullmatch(name):
            o.ctx.add(invalid(h.at("name"), name, "must be a valid header name"))
        if not value or len(value) > 4096:
            o.ctx.add(invalid(h.at("value"), value, "must be 1 to 4096 characters"))
        elif kind == "RegularExpression" and (error := pcre_error(value)) is not None:
            o.ctx.add(invalid(h.at("value"), value, f"must be a valid regular expression: {error}"))
        elif any(c in value for c in "\r\n\0"):
            o.ctx.add(invalid(h.at("value"), value, "must not contain line breaks"))
        if name.lower() in seen:
            o.ctx.add(duplicate(h.at("name"), name))
        seen.add(name.lower())
        out.append(ValueMatch(kind, name, value))
    if len(out) > 16:
        o.ctx.add(invalid(o.at("headers"), len(out), "must have at most 16 items"))
    return tuple(out)
