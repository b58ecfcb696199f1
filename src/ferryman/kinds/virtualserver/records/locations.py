"""NGINX's location choice and NIC's match conditions: the reference for the
VirtualServer routing that ``dataplane/lua/ferryman.lua`` (``vs_*``) does per request.

NIC writes each VirtualServer route as an NGINX ``location``, so a request picks
its route as NGINX picks a location (ngx_http_core_find_location):

1. a location named exactly the URI: an ``=`` one is taken at once; a prefix one
   is the longest prefix (step 3);
2. else a location named the URI plus ``/`` whose route proxies (NGINX's
   ``auto_redirect``, set by ``proxy_pass`` in a location ending in ``/``)
   answers 301 to that name (with the query string), before any regex;
3. the longest prefix (plain or ``^~``); a ``^~`` one is taken at once;
4. the regular expressions (``~`` case-sensitive, ``~*`` not) in the order of
   the routes, the first that finds a match anywhere in the URI;
5. else the longest prefix, else nothing (404).

A match condition compares a request value with NIC's ``value`` as NGINX's
``map`` does: a leading ``!`` negates; ``~`` and ``~*`` are regular expressions
(case-sensitive or not; never matched against an empty value); a leading ``\\``
is dropped; any other value is compared case-insensitively. The value is first
read as NGINX reads the quoted string NIC writes it into (``unquote``).

Regular expressions: NGINX uses PCRE, this reference Python's ``re`` (tests use
expressions both read alike).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

EXACT, PREFIX, NO_REGEX, REGEX, REGEX_CASELESS = "=", "", "^~", "~", "~*"


@dataclass(frozen=True)
class Location:
    modifier: str  # EXACT, PREFIX, NO_REGEX, REGEX or REGEX_CASELESS
    path: str  # the path, or the regular expression
    proxies: bool = False  # NGINX's auto_redirect applies (a proxying route ending in "/")


@dataclass(frozen=True)
class Found:
    index: int  # the location's position
    redirect: bool = False  # answer 301 to the location's name (auto_redirect)


def find_location(locations: Sequence[Location], uri: str) -> Found | None:
    """The location NGINX picks for ``uri`` (see the module's docstring)."""
    longest: int | None = None
    redirect: int | None = None
    for i, loc in enumerate(locations):
        if loc.modifier in (REGEX, REGEX_CASELESS):
            continue
        if loc.path == uri:
            if loc.modifier == EXACT:
                return Found(i)
            longest = i
        elif loc.path == uri + "/" and loc.proxies and redirect is None:
            redirect = i
    if longest is None and redirect is not None:
        return Found(redirect, redirect=True)
    if longest is None:
        best = -1
        for i, loc in enumerate(locations):
            prefix = loc.modifier in (PREFIX, NO_REGEX) and uri.startswith(loc.path)
            if prefix and len(loc.path) > best:
                best, longest = len(loc.path), i
    if longest is not None and locations[longest].modifier == NO_REGEX:
        return Found(longest)
    for i, loc in enumerate(locations):
        if loc.modifier in (REGEX, REGEX_CASELESS):
            flags = re.IGNORECASE if loc.modifier == REGEX_CASELESS else 0
            if re.search(loc.path, uri, flags):
                return Found(i)
    return Found(longest) if longest is not None else None


def condition_holds(value: str, actual: str) -> bool:
    """Whether the request's ``actual`` value meets a condition's (unquoted) ``value``."""
    negate = value.startswith("!")
    if negate:
        value = value[1:]
    if value.startswith("~"):
        caseless = value.startswith("~*")
        pattern = value[2:] if caseless else value[1:]
        flags = re.IGNORECASE if caseless else 0
        found = bool(actual) and re.search(pattern, actual, flags) is not None
    else:
        if value.startswith("\\"):
            value = value[1:]
        found = value.lower() == actual.lower()
    return found != negate


def rewrite(loc: Location, rewrite_path: str, uri: str) -> str:
    """The URI a proxy action's ``rewritePath`` sends upstream, as NIC's configuration
    does: a path's location prefix is replaced (``proxy_pass http://up/rewrite``); a
    regex route's URI becomes the rewrite with ``$1``... from the expression matched
    case-sensitively at the URI's start (``rewrite "^regex" "rewrite" break``), or
    stays as it is when that does not match."""
    if loc.modifier not in (REGEX, REGEX_CASELESS):
        return rewrite_path + uri[len(loc.path) :]
    m = re.match(loc.path, uri)
    if m is None:
        return uri
    return re.sub(r"\$([0-9])", lambda d: m.group(int(d.group(1))) or "", rewrite_path)


def source_variable(kind: str, name: str) -> str:
    """The NGINX variable (without ``$``) a condition reads, as NIC names it."""
    if kind == "header":
        return "http_" + name.lower().replace("-", "_")
    if kind == "cookie":
        return "cookie_" + name
    if kind == "argument":
        return "arg_" + name
    return name.removeprefix("$")


def first_match(
    matches: Sequence[Sequence[tuple[str, str]]], variables: Mapping[str, str]
) -> int | None:
    """The index of the first match whose every (variable, value) condition holds."""
    for i, conditions in enumerate(matches):
        if all(condition_holds(value, variables.get(var, "")) for var, value in conditions):
            return i
    return None
