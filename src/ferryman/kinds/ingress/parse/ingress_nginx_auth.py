"""auth-url's further settings: the X-Auth-Request-Redirect header sent to the
auth service, the auth service's Set-Cookie passed on, the auth answer cached,
and what ferryman says of the keepalive settings it does not apply.

Read with ``ingress_nginx_access.external_auth`` (auth-url's group). A value
that cannot be applied as written is said in a Warning where serving without
it asks the auth service more often (the cache) or sends what ingress-nginx
sends by default; never where the request would be let through more openly.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

PREFIX = "nginx.ingress.kubernetes.io/"

EXTRAS = (
    "auth-request-redirect",
    "auth-always-set-cookie",
    "auth-cache-key",
    "auth-cache-duration",
    "auth-keepalive",
    "auth-keepalive-requests",
    "auth-keepalive-timeout",
    "auth-keepalive-share-vars",
)

# The request's variables a cache key may name: what tells one client's
# credentials from another's. ngx.var reads them; nothing is evaluated.
_KEY_VARIABLE = re.compile(
    r"(?:http|cookie|arg)_[a-z0-9_]{1,64}|remote_user|remote_addr|host|http_host|uri"
    r"|request_uri|scheme|server_name"
)
_VARIABLE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$")
_MAX_KEY = 512
# ingress-nginx's default auth-cache-duration.
DEFAULT_CACHE_VALID = "200 202 401 5m"
# NGINX's time units (proxy_cache_valid's time).
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "M": 2592000, "y": 31536000}
_TIME = re.compile(r"(?:[0-9]{1,9}[smhdwMy])+|[0-9]{1,9}")
_PART = re.compile(r"([0-9]{1,9})([smhdwMy]?)")
# proxy_cache_valid with a time alone.
_TIME_ONLY_CODES = (200, 301, 302)

CacheValid = tuple[tuple[tuple[int, ...], int], ...]


class Bad(ValueError):
    """A value not applied; the message says what is done instead."""


def template(value: str, allowed: re.Pattern[str] | frozenset[str], what: str) -> str:
    """``value`` with each variable as ``${name}`` (filled in per request);
    Bad when it names one not ``allowed``."""

    def variable(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        ok = (
            name is not None and allowed.fullmatch(name) is not None
            if isinstance(allowed, re.Pattern)
            else name in allowed
        )
        if not ok:
            raise Bad(f"{m.group(0)!r} is not a variable ferryman fills in for {what}")
        return "${" + name + "}"

    return _VARIABLE.sub(variable, value)


def seconds(text: str) -> int | None:
    """NGINX's time (``30m``, ``1h30m``, ``90``: seconds); None: not one."""
    if not _TIME.fullmatch(text):
        return None
    return sum(int(n) * _UNITS[u or "s"] for n, u in _PART.findall(text))


def cache_valid(text: str) -> CacheValid:
    """auth-cache-duration (``200 202 10m, 401 5m``, proxy_cache_valid's form,
    comma-separated) as (codes, seconds); codes () means any."""
    out = []
    for entry in text.split(","):
        words = entry.split()
        if not words:
            continue
        ttl = seconds(words[-1])
        if ttl is None:
            raise Bad(f"{words[-1]!r} is not a time (as 30m, 1h)")
        codes: tuple[int, ...] = _TIME_ONLY_CODES if len(words) == 1 else ()
        if words[:-1] != ["any"]:
            for w in words[:-1]:
                if not (w.isdigit() and len(w) == 3 and 100 <= int(w) <= 599):
                    raise Bad(f"{w!r} is not a status code (or any)")
            codes = codes or tuple(int(w) for w in words[:-1])
        out.append((codes, ttl))
    if not out:
        raise Bad("names no time")
    return tuple(out)


def request_redirect(annotations: Mapping[str, str], variables: frozenset[str]) -> str:
    """X-Auth-Request-Redirect's value as a template; ingress-nginx's default,
    the request's URI, when unset. Refused (ValueError) when it cannot be sent."""
    raw = annotations.get(PREFIX + "auth-request-redirect", "").strip()
    if not raw:
        return "${request_uri}"
    if len(raw) > 2048 or any(ord(c) < 0x20 or ord(c) == 0x7F for c in raw):
        raise Bad(f"{raw[:80]!r} is not a header value")
    return template(raw, variables, "auth-request-redirect")


def set_cookie(annotations: Mapping[str, str], warnings: list[str]) -> str:
    """When the auth service's Set-Cookie reaches the client: "success" (the
    response's status is one add_header sends on, ingress-nginx's default) or
    "always" (auth-always-set-cookie: true)."""
    raw = annotations.get(PREFIX + "auth-always-set-cookie")
    if raw is None:
        return "success"
    value = raw.strip().lower()
    if value not in ("true", "false"):
        warnings.append(
            f"annotation {PREFIX}auth-always-set-cookie: {raw!r} is not true or false: false"
        )
    return "always" if value == "true" else "success"


def cache(annotations: Mapping[str, str], warnings: list[str]) -> tuple[str, CacheValid]:
    """auth-cache-key as a template and auth-cache-duration's times; ("", ())
    when not cached (unset, or a value not applied: a Warning, every request
    is then asked to the auth service)."""
    key = annotations.get(PREFIX + "auth-cache-key", "").strip()
    duration = annotations.get(PREFIX + "auth-cache-duration")
    if not key:
        if duration is not None:
            warnings.append(
                f"annotation {PREFIX}auth-cache-duration: not applied without "
                f"{PREFIX}auth-cache-key (as ingress-nginx): nothing is cached"
            )
        return "", ()
    try:
        if len(key) > _MAX_KEY or any(ord(c) < 0x20 or ord(c) == 0x7F for c in key):
            raise Bad("is not a cache key")
        key_template = template(key, _KEY_VARIABLE, "auth-cache-key")
    except Bad as b:
        warnings.append(
            f"annotation {PREFIX}auth-cache-key: {key[:80]!r}: {b}: not applied, nothing "
            "is cached (variables: $http_<name>, $cookie_<name>, $arg_<name>, $remote_user, "
            "$remote_addr, $host, $http_host, $uri, $request_uri, $scheme, $server_name)"
        )
        return "", ()
    if "${" not in key_template:
        # Served as asked (ingress-nginx's e2e tests use such a key), but said.
        warnings.append(
            f"annotation {PREFIX}auth-cache-key: {key[:80]!r} names no variable: one kept "
            "answer is given to every client of the host"
        )
    try:
        valid = cache_valid(duration if duration is not None else DEFAULT_CACHE_VALID)
    except Bad as b:
        warnings.append(
            f"annotation {PREFIX}auth-cache-duration: {duration!r}: {b}: "
            f"ingress-nginx's default ({DEFAULT_CACHE_VALID}) is used"
        )
        valid = cache_valid(DEFAULT_CACHE_VALID)
    return key_template, valid


KEEPALIVE_DIFFERS = (
    "ferryman always keeps connections to the auth service open for reuse (the pool its "
    "backends' requests use: up to 64 idle per worker, NGINX's keepalive_requests 1000 "
    "and keepalive_timeout 60s)"
)


def keepalive(annotations: Mapping[str, str], warnings: list[str]) -> None:
    """auth-keepalive*: a Warning naming each set and what ferryman does instead."""
    for key in EXTRAS[4:7]:
        if PREFIX + key in annotations:
            warnings.append(
                f"annotation {PREFIX}{key}: {annotations[PREFIX + key]!r} is not applied: "
                f"{KEEPALIVE_DIFFERS}"
            )
    share = annotations.get(PREFIX + "auth-keepalive-share-vars")
    if share is not None and share.strip().lower() == "true":
        warnings.append(
            f"annotation {PREFIX}auth-keepalive-share-vars: not applied: ferryman's auth "
            "subrequest shares no variables with the request (as false)"
        )


# The table rows of docs/ingress-nginx.md (ingress_nginx.ENTRIES).
AUTH_URL = (
    "as an externalAuth Policy: the URL must name a cluster Service "
    "(http(s)://<service>[.<namespace>[.svc[.cluster.local]]][:port]/path[?query], no "
    "NGINX variables); an external host or anything else rejects the Ingress. "
    "auth-signin: a 401 answered 302 to it with <auth-signin-redirect-param, "
    "rd>=<scheme>://<host><escaped URI> unless it names that parameter (its $host, "
    "$http_host, $scheme, $pass_access_scheme, $request_uri, $escaped_request_uri filled "
    "in; another variable rejects the Ingress); auth-response-headers set on the proxied "
    "request (removed when the auth response has none); auth-method GET only (another "
    "rejects the Ingress). X-Auth-Request-Redirect is auth-request-redirect (those "
    "variables filled in) or the request URI; X-Original-URL (<scheme>://<Host><URI>), "
    "X-Original-Method and X-Sent-From: nginx-ingress-controller as ingress-nginx sends "
    "them (Authelia's and authentik's auth-request endpoints read them), and Host: "
    "the auth URL's host, as ingress-nginx. The auth service's "
    "Set-Cookie is added to a 200/201/204/206/301/302/303/304/307/308 answer, any with "
    "auth-always-set-cookie. auth-cache-key ($http_*, $cookie_*, $arg_*, $remote_user, "
    "$remote_addr, $host, $uri, $request_uri, $scheme) with auth-cache-duration "
    "(proxy_cache_valid's form) keeps answers in a shared dict, one key space per host "
    "and auth configuration (ingress-nginx: per location), never one with Set-Cookie or "
    "Cache-Control no-cache/no-store/private (max-age wins); another variable: not "
    "cached, a Warning. auth-keepalive, -requests, -timeout, -share-vars: not applied, "
    "a Warning: ferryman always keeps connections to the auth service (its backends' "
    "pool, 64 idle per worker) and shares no variables"
)
PROXY_SET_HEADERS = (
    "not implemented: ferryman does not read arbitrary ConfigMaps for Ingresses (it holds "
    "ConfigMaps by the keys its kinds name, and these keys are header names), and the "
    "auth service may decide by the headers it names: the Ingress is rejected rather "
    "than authenticated without them"
)
