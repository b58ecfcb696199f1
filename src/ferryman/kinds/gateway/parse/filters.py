"""HTTPRoute filters (gateway-api v1.6): their typed view and the CRD's rules
for each filter type and between a rule's filters.

A rule and each of its backendRefs carry filters of the same shape, and
``kinds/gateway/records/routes.py`` renders them; they live here, apart from the
route's matches and backends (``gateway_api``), to keep each module to one
part of the specification.
"""

from __future__ import annotations

from dataclasses import dataclass

from ferryman.kinds.gateway.parse.cors import Cors, parse_cors
from ferryman.kinds.gateway.parse.fields import (
    HEADER_NAME_RE,
    HOSTNAME_RE,
    PATH_RE,
    ObjectReference,
    parse_reference,
)
from ferryman.resources.nic_fields import Obj, invalid, required

_REDIRECT_CODES = (301, 302, 303, 307, 308)
# An HTTPRouteFilter's keys: the type and one field per filter type.
FILTER_KEYS = frozenset(
    {"type", "requestHeaderModifier", "responseHeaderModifier", "requestRedirect",
     "urlRewrite", "requestMirror", "extensionRef", "cors", "externalAuth"}
)  # fmt: skip


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


def _header_changes(o: Obj) -> HeaderChanges:
    def pairs(key: str) -> tuple[tuple[str, str], ...]:
        out = []
        for h in o.objs(key, frozenset({"name", "value"})):
            name, value = h.text("name"), h.text("value")
            if not HEADER_NAME_RE.fullmatch(name):
                o.ctx.add(invalid(h.at("name"), name, "must be a valid HTTP header name"))
            if any(c in value for c in "\r\n\0"):
                o.ctx.add(invalid(h.at("value"), value, "must not contain line breaks"))
            out.append((name, value))
        return tuple(out)

    remove = o.strs("remove") or ()
    for name in remove:
        if not HEADER_NAME_RE.fullmatch(name):
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
    if not value.startswith("/") or not PATH_RE.fullmatch(value):
        o.ctx.add(invalid(o.at(kind[0].lower() + kind[1:]), value, "must be an absolute path"))
    return PathModifier(kind, value)


_PATH_KEYS = frozenset({"type", "replaceFullPath", "replacePrefixMatch"})


def parse_filter(o: Obj) -> Filter:
    """One filter of a rule or a backendRef, checked by its type's rules."""
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
        if hostname is not None and not HOSTNAME_RE.fullmatch(hostname):
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
        if hostname is not None and not HOSTNAME_RE.fullmatch(hostname):
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
            backend=parse_reference(ref, default_kind="Service"),
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


def check_filters(o: Obj, filters: tuple[Filter, ...]) -> None:
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
