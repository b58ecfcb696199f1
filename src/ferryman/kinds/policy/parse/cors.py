"""The ``cors`` Policy: model and NIC's rules (its Go checks and its CRD's CEL rules)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from ferryman.resources import nic_rules as rules
from ferryman.resources.nic_fields import Obj, duplicate, invalid, required

CORS_KEYS = frozenset(
    {"allowOrigin", "allowMethods", "allowHeaders", "allowCredentials", "exposeHeaders", "maxAge"}
)
METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH")
_DANGEROUS = frozenset(";{}\n\r$`")
# Headers browsers set themselves (the Fetch standard's forbidden request headers).
_FORBIDDEN_REQUEST = frozenset(
    [
        "accept-charset",
        "accept-encoding",
        "access-control-request-headers",
        "access-control-request-method",
        "connection",
        "content-length",
        "cookie",
        "date",
        "dnt",
        "expect",
        "host",
        "keep-alive",
        "origin",
        "referer",
        "set-cookie",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "via",
    ]
)
_FORBIDDEN_REQUEST_MSG = (
    "forbidden request header cannot be set by JavaScript and should not be listed in allowHeaders"
)
_FORBIDDEN_RESPONSE_MSG = (
    "forbidden response header cannot be exposed via CORS and should not be listed in exposeHeaders"
)
_INJECTION = "contains dangerous characters that could cause nginx configuration injection"


@dataclass(frozen=True)
class CORS:
    allow_origin: tuple[str, ...]
    allow_methods: tuple[str, ...] = ()
    allow_headers: tuple[str, ...] = ()
    allow_credentials: bool = False
    expose_headers: tuple[str, ...] = ()
    max_age: int = 86400  # seconds; NIC's default


def parse_cors(c: Obj) -> CORS:
    ctx = c.ctx
    origins = c.str_items("allowOrigin") or []
    if not origins:
        ctx.add(required(c.at("allowOrigin"), "must have at least 1 items"))
    first: dict[str, int] = {}
    for i, (where, origin) in enumerate(origins):
        if origin in first:
            message = (
                f"origin '{origin}' already specified at index {first[origin]}, duplicates "
                "cause nginx configuration conflicts"
            )
            ctx.add(duplicate(where, message))
        first.setdefault(origin, i)
        if not origin:
            ctx.add(invalid(where, origin, "origin cannot be empty"))
        elif problem := origin_problem(origin):
            ctx.add(invalid(where, origin, problem))
        if _DANGEROUS & set(origin) or rules.token(origin, "origin"):
            ctx.add(invalid(where, origin, f"origin {_INJECTION}"))
    credentials = c.boolean("allowCredentials") is True
    if credentials and any(o == "*" for _, o in origins):
        message = (
            "cannot use wildcard '*' for allowOrigin when allowCredentials is true for "
            "security reasons"
        )
        ctx.add(invalid(c.path, "", message))
    methods = _methods(c)
    allow_headers = _headers(c, "allowHeaders", _forbidden_request, _FORBIDDEN_REQUEST_MSG)
    expose = _headers(c, "exposeHeaders", _forbidden_response, _FORBIDDEN_RESPONSE_MSG)
    max_age = c.integer("maxAge")
    if max_age is not None and max_age < 0:
        ctx.add(invalid(c.at("maxAge"), max_age, "should be greater than or equal to 0"))
    return CORS(
        tuple(o for _, o in origins),
        methods,
        allow_headers,
        credentials,
        expose,
        86400 if max_age is None else max_age,
    )


def origin_problem(origin: str) -> str | None:
    """NIC's validateOriginFormat: "*", or scheme://host[:port] with at most one leading "*."."""
    if origin == "*":
        return None
    try:
        parts = urlsplit(origin)
    except ValueError:
        return "invalid origin URL format"
    if parts.scheme not in ("http", "https"):
        return "origin must start with http:// or https:// (or be '*')"
    if not parts.netloc:
        return "origin host cannot be empty"
    if "@" in parts.netloc:
        return "origin must not include @"
    if parts.path not in ("", "/"):
        return "origin must not include a path"
    if parts.query:
        return "origin must not include query parameters"
    if parts.fragment:
        return "origin must not include a fragment"
    host = parts.netloc
    if not host.startswith("*."):
        if "*" in host:
            return (
                "wildcards are only supported in subdomain format (*.domain.com), not in "
                "other positions"
            )
        return None
    domain = host[2:]
    if not domain:
        return f"wildcard subdomain cannot be empty (invalid format: {origin})"
    if "*" in domain:
        return f"only single-level wildcard subdomains are supported (invalid: {origin})"
    name, colon, port = domain.partition(":")
    if colon and not port:
        return f"port cannot be empty when colon is present (invalid: {origin})"
    if colon and not (port.isascii() and port.isdigit()):
        return f"port must be numeric (invalid: {origin})"
    if errs := rules.dns1123_subdomain(name):
        return f"wildcard subdomain is not a valid DNS name: {', '.join(errs)} (invalid: {origin})"
    return None


def _methods(c: Obj) -> tuple[str, ...]:
    items = c.str_items("allowMethods") or []
    for where, method in items:
        if _DANGEROUS & set(method):
            c.ctx.add(invalid(where, method, f"method {_INJECTION}"))
        if method not in METHODS:
            c.ctx.add(invalid(where, method, "allowed methods must be valid HTTP methods"))
    methods = tuple(m for _, m in items)
    if "GET" in methods and "HEAD" in methods:
        message = (
            "HEAD method should not be explicitly listed when GET is present as browsers "
            "automatically support HEAD for GET endpoints"
        )
        c.ctx.add(invalid(c.at("allowMethods"), list(methods), message))
    return methods


def _forbidden_request(name: str) -> bool:
    lower = name.lower()
    return lower in _FORBIDDEN_REQUEST or lower.startswith(("proxy-", "sec-"))


def _forbidden_response(name: str) -> bool:
    return name.lower() in ("set-cookie", "set-cookie2")


def _headers(
    c: Obj, key: str, forbidden: Callable[[str], bool], forbidden_message: str
) -> tuple[str, ...]:
    items = c.str_items(key) or []
    for where, name in items:
        if name == "*":
            continue
        if not re.fullmatch(r"[a-zA-Z0-9\-_]+", name):
            message = (
                "RFC 7230 violation: invalid header name, must contain only letters, digits, "
                "hyphens"
            )
            c.ctx.add(invalid(where, name, message))
        if _DANGEROUS & set(name):
            c.ctx.add(invalid(where, name, f"header name {_INJECTION}"))
        if "*" in name:
            message = (
                "wildcard '*' may only be used as a standalone value, not embedded in a header name"
            )
            c.ctx.add(invalid(where, name, message))
        if forbidden(name):
            c.ctx.add(invalid(where, name, forbidden_message))
    return tuple(n for _, n in items)
