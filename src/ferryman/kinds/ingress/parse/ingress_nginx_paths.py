"""ingress-nginx's paths-and-redirects annotations, as ingress-nginx serves them.

- ``use-regex: "true"`` or any ``rewrite-target``: every path of the Ingress
  (but Exact ones) is a case-insensitive regular expression anchored at the
  URI's start, ingress-nginx's ``location ~* "^<path>"``; translated into
  ``nginx.org/path-regex: case_insensitive`` (NIC's checks on the regex).
  ingress-nginx makes every path of the *host* a regex once one Ingress of it
  asks; ferryman does it within the Ingress (a host has one owner Ingress
  here, mergeable minions aside).
- ``rewrite-target``: the URI sent upstream is ``rewrite "(?i)<path>"
  <target> break``'s: the whole URI becomes the target, ``$1``... the
  groups of the path matched case-insensitively.
- ``app-root``: a request for ``/`` answers 302 to
  ``$scheme://$http_host<app-root>``.
- ``force-ssl-redirect``: a request over http answers 308 to
  ``https://$host$request_uri``, TLS on the Ingress or not, the URI's trailing
  slash dropped unless ``preserve-trailing-slash`` (as ingress-nginx's
  lua_ingress); ``nginx.org/redirect-to-https`` wins.
- ``server-alias``: each name (comma-separated) routes as the Ingress's
  first host; TLS for it only when ``spec.tls`` lists it (ingress-nginx
  serves the host's certificate for it); a host another resource owns stays
  theirs (ownership: the oldest wins, reported).
- ``from-to-www-redirect``: ``www.<host>`` (or ``<host>`` for a
  ``www.`` rule) answers 308 to ``$scheme://<host>:$server_port$request_uri``
  (ingress-nginx's redirect server; the trailing slash is kept here), when
  the Ingress does not route that name itself.
- ``permanent-redirect`` (code ``permanent-redirect-code``, 301 by default)
  and ``temporal-redirect`` (``temporal-redirect-code``, 302): every path
  answers the redirect; temporal-redirect wins when both are set, as
  ingress-nginx's parser.

The values become fields of records (never NGINX text); what ingress-nginx
would not take is not applied, with a Warning.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ferryman.resources import validation

PREFIX = "nginx.ingress.kubernetes.io/"
NGINX_ORG = "nginx.org/"


@dataclass(frozen=True)
class Paths:
    """What the Ingress's paths answer beyond proxying (None: nothing)."""

    rewrite_target: str | None = None  # the URI with $1..., matched caseless
    app_root: str | None = None  # "/" answers 302 to it
    redirect: tuple[int, str] | None = None  # (code, URL with ${variables})
    # force-ssl-redirect: None off, else preserve-trailing-slash.
    force_ssl_redirect: bool | None = None
    # server-alias: more host names served as the Ingress's first host.
    aliases: tuple[str, ...] = ()
    # from-to-www-redirect: host -> the host it answers 308 to.
    www: tuple[tuple[str, str], ...] = ()


# A rewrite target: a path of URI characters with $1..$9 for the groups.
_TARGET = re.compile(r"/(?:[A-Za-z0-9._~!&'()*+,=:@%/\-]|\$[0-9])*")
_APP_ROOT = re.compile(r"/[A-Za-z0-9._~!&'()*+,=:@%/\-]*(?:\?[A-Za-z0-9._~!&'()*+,=:@%/\-]*)?")
# NGINX variables a redirect URL may use ($name or ${name}): those the slow
# path expands in a VirtualServer's redirect (NIC's list) and ingress-nginx's
# common $request_uri, $host, $scheme, $uri.
_VARIABLES = frozenset({"scheme", "host", "request_uri", "http_x_forwarded_proto", "uri"})
_URL = re.compile(r"https?://[^\s\"'\\<>^`{|}$]+")
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z0-9_]*)\}|([A-Za-z0-9_]+))")
# ngx.redirect's codes (the 3xx NGINX's return serves with a Location).
_REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})


def regex(annotations: Mapping[str, str]) -> bool:
    """Whether the Ingress's paths are regular expressions (ingress-nginx's enforceRegex)."""
    use = annotations.get(PREFIX + "use-regex", "").strip().lower() == "true"
    return use or bool(annotations.get(PREFIX + "rewrite-target", "").strip())


def target(value: str) -> str | None:
    """The problem with a rewrite-target, or None."""
    if not _TARGET.fullmatch(value):
        return (
            "must be a path of URI characters, with $1...$9 for the path's groups "
            "(no other variables, no query string)"
        )
    return None


def app_root(value: str) -> str | None:
    """The problem with an app-root, or None (ingress-nginx: a path, not a URL)."""
    if not _APP_ROOT.fullmatch(value):
        return "must be a path (starting with /) of URI characters"
    return None


def redirect_url(value: str) -> tuple[str | None, str | None]:
    """The URL as the V record's redirect (``${name}`` variables), and the problem."""
    problem = None

    def variable(m: re.Match[str]) -> str:
        nonlocal problem
        name = m.group(1) if m.group(1) is not None else m.group(2)
        if name not in _VARIABLES:
            problem = f"${name} is not one of ${', $'.join(sorted(_VARIABLES))}"
        # Stands for its value in the check of the URL's form.
        return "http" if name in ("scheme", "http_x_forwarded_proto") else "x"

    plain = _VARIABLE.sub(variable, value)
    if problem is not None:
        return None, problem
    if not _URL.fullmatch(plain):
        return None, "must be an http:// or https:// URL without whitespace or quotes"
    url = _VARIABLE.sub(lambda m: "${" + (m.group(1) or m.group(2)) + "}", value)
    return url, None


def _code(annotations: Mapping[str, str], key: str, default: int, warnings: list[str]) -> int:
    raw = annotations.get(PREFIX + key)
    if raw is None:
        return default
    v = raw.strip()
    if v.isdigit() and int(v) in _REDIRECT_CODES:
        return int(v)
    warnings.append(
        f"annotation {PREFIX}{key}: {raw!r} must be one of "
        f"{', '.join(map(str, sorted(_REDIRECT_CODES)))}: {default} applies"
    )
    return default


def paths(annotations: Mapping[str, str], warnings: list[str], spec: object = None) -> Paths:
    """The Ingress's Paths from its ingress-nginx annotations; what is not
    applied is said in ``warnings``."""
    rewrite = app = None
    redirect: tuple[int, str] | None = None
    for key in ("rewrite-target", "app-root"):
        if PREFIX + key in annotations and NGINX_ORG + key in annotations:
            warnings.append(
                f"annotation {PREFIX}{key} is not applied: {NGINX_ORG}{key} is set and wins"
            )
    if (raw := annotations.get(PREFIX + "rewrite-target")) is not None and raw.strip():
        if NGINX_ORG + "rewrite-target" in annotations:
            pass
        elif (problem := target(raw.strip())) is None:
            rewrite = raw.strip()
        else:
            warnings.append(f"annotation {PREFIX}rewrite-target: {raw!r} {problem}: not applied")
    if (raw := annotations.get(PREFIX + "app-root")) is not None and raw.strip():
        if NGINX_ORG + "app-root" in annotations:
            pass
        elif (problem := app_root(raw.strip())) is None:
            app = raw.strip()
        else:
            warnings.append(f"annotation {PREFIX}app-root: {raw!r} {problem}: not applied")
    for key, default in (("temporal-redirect", 302), ("permanent-redirect", 301)):
        raw = annotations.get(PREFIX + key)
        if raw is None or not raw.strip():
            continue
        url, problem = redirect_url(raw.strip())
        if url is None:
            warnings.append(f"annotation {PREFIX}{key}: {raw!r} {problem}: not applied")
            continue
        if redirect is not None:
            warnings.append(f"annotation {PREFIX}{key} is not applied: temporal-redirect wins")
            continue
        redirect = (_code(annotations, key + "-code", default, warnings), url)
    force = None
    if _flag(annotations, "force-ssl-redirect", warnings):
        force = _flag(annotations, "preserve-trailing-slash", warnings)
    www = _flag(annotations, "from-to-www-redirect", warnings)
    return Paths(
        rewrite, app, redirect, force, _aliases(annotations, warnings), www_of(spec) if www else ()
    )


def www_of(spec: object) -> tuple[tuple[str, str], ...]:
    """from-to-www-redirect: for each rule host, the other of www.<host> and
    <host> that redirects to it (ingress-nginx's redirect servers); none for a
    host the spec routes itself."""
    rules = spec.get("rules") if isinstance(spec, Mapping) else None
    if not isinstance(rules, list):
        return ()
    hosts = [r.get("host") for r in rules if isinstance(r, Mapping)]
    named = [h for h in hosts if isinstance(h, str) and h and not h.startswith("*.")]
    out: dict[str, str] = {}
    for h in named:
        other = h.removeprefix("www.") if h.startswith("www.") else "www." + h
        if other not in named and validation.host(other) is None:
            out.setdefault(other, h)
    return tuple(out.items())


def _aliases(annotations: Mapping[str, str], warnings: list[str]) -> tuple[str, ...]:
    raw = annotations.get(PREFIX + "server-alias")
    if raw is None:
        return ()
    out: dict[str, None] = {}
    for name in raw.split(","):
        name = name.strip().lower()
        if not name:
            continue
        if (problem := validation.host(name)) is not None:
            warnings.append(f"annotation {PREFIX}server-alias: {name!r} {problem}: not applied")
            continue
        out.setdefault(name, None)
    return tuple(out)


def with_aliases(spec: object, aliases: tuple[str, ...]) -> object:
    """``spec`` with a rule for each alias that routes as its first rule with a
    host does (ingress-nginx's server_name <host> <aliases>); an alias that is
    already a rule's host is that rule's."""
    if not aliases or not isinstance(spec, Mapping):
        return spec
    rules = spec.get("rules")
    if not isinstance(rules, list):
        return spec
    hosts = {r.get("host") for r in rules if isinstance(r, Mapping)}
    first = next((r for r in rules if isinstance(r, Mapping) and r.get("host")), None)
    if first is None:
        return spec
    added = [{**first, "host": a} for a in aliases if a not in hosts]
    return {**spec, "rules": [*rules, *added]}


def with_www(spec: object, www: tuple[tuple[str, str], ...]) -> object:
    """``spec`` with a rule for each from-to-www host (its routes answer the
    redirect: ``as_virtualserver``), routing as the host it redirects to."""
    if not www or not isinstance(spec, Mapping) or not isinstance(spec.get("rules"), list):
        return spec
    rules = spec["rules"]
    by_host = {r.get("host"): r for r in rules if isinstance(r, Mapping)}
    added = [{**by_host[to], "host": source} for source, to in www if to in by_host]
    return {**spec, "rules": [*rules, *added]}


def _flag(annotations: Mapping[str, str], key: str, warnings: list[str]) -> bool:
    raw = annotations.get(PREFIX + key)
    if raw is None:
        return False
    v = raw.strip().lower()
    if v not in ("true", "false"):
        warnings.append(f'annotation {PREFIX}{key}: {raw!r} must be "true" or "false": not applied')
    return v == "true"
