"""Kubernetes path matching and the record format NGINX's Lua router reads.

``match`` is the reference for what ``dataplane/lua/ferryman.lua`` does per
request: an Exact path must equal the request path; a Prefix path matches
element-wise (``/foo`` matches ``/foo``, ``/foo/``, ``/foo/bar``, never
``/foobar``), longest first; the Ingress's defaultBackend, or 404, otherwise.
An Exact match is always the longest possible, so it wins any tie.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ferryman.configs.model import BackendKey, Route, VirtualHost

NO_BACKEND = "-"
# A scheme a host with custom listeners is not served on (never a listener's name).
NO_LISTENER = "-"


def route_tables(routes: Iterable[Route]) -> tuple[dict[str, str], dict[str, str]]:
    """(exact, prefix) path -> backend; the first route for a path wins."""
    exact: dict[str, str] = {}
    prefix: dict[str, str] = {}
    for r in routes:
        (exact if r.exact else prefix).setdefault(r.path, r.backend)
    return exact, prefix


def match(
    exact: Mapping[str, str], prefix: Mapping[str, str], default: str | None, path: str
) -> str | None:
    if path in exact:
        return exact[path]
    candidate = path.rstrip("/") or "/"
    while True:
        if candidate in prefix:
            return prefix[candidate]
        if candidate == "/":
            return default
        candidate = candidate[: candidate.rfind("/")] or "/"


def encode_host(vh: VirtualHost) -> str:
    """``<tls> <redirect> <default> <balancing> <E|P>|<path>|<backend> ...`` (one line).

    tls: "-" plain HTTP only, "!" TLS with an unusable certificate, else the
    certificate id. redirect: "1" sends plain HTTP to HTTPS, then, for a host
    served on custom listeners only, ``:<http listener>:<https listener>``
    ("-" for none: that scheme is served nowhere). balancing:
    ``<rr|lc>:<max_fails>:<fail_timeout seconds>``.
    """
    tls = (vh.cert_id or "!") if vh.tls else "-"
    exact, prefix = route_tables(vh.routes)
    fields = [
        tls,
        ("1" if vh.redirect_https else "0") + listeners_suffix(vh.listeners),
        vh.default_backend or NO_BACKEND,
        vh.balancing,
    ]
    fields += [f"E|{p}|{b}" for p, b in sorted(exact.items())]
    fields += [f"P|{p}|{b}" for p, b in sorted(prefix.items())]
    return " ".join(fields)


def listeners_suffix(listeners: tuple[str, str] | None) -> str:
    """The redirect field's suffix naming a host's custom listeners ("": the
    default ports). "-" stands for none: "" is the default ports' listener."""
    if listeners is None:
        return ""
    http, https = listeners
    return f":{http or NO_LISTENER}:{https or NO_LISTENER}"


def decode_listeners(line: str) -> tuple[str, str] | None:
    """The custom listeners an H record names (None: the default ports)."""
    parts = line.split(" ", 2)[1].split(":")
    if len(parts) != 3:
        return None
    http, https = (p if p != NO_LISTENER else "" for p in parts[1:])
    return http, https


def decode_host(line: str) -> tuple[str, bool, str | None, dict[str, str], dict[str, str]]:
    """Inverse of ``encode_host``, less balancing and listeners (tests and
    ``render`` readers use it; ``decode_listeners`` reads those)."""
    tls, redirect, default, _balancing, *routes = line.split(" ")
    redirect = redirect.split(":", 1)[0]
    exact: dict[str, str] = {}
    prefix: dict[str, str] = {}
    for r in routes:
        kind, path, backend = r.split("|")
        (exact if kind == "E" else prefix)[path] = backend
    return tls, redirect == "1", None if default == NO_BACKEND else default, exact, prefix


def backends_of(vh: VirtualHost) -> set[BackendKey]:
    found = {r.backend for r in vh.routes}
    if vh.default_backend:
        found.add(vh.default_backend)
    return found
