"""One listener hostname's HTTPRoute matches as an ``F`` record: the routes
ngx_http_ferryman_module could serve in C, in the grammar it already reads for
VirtualServers (``dataplane/module/ngx_http_ferryman_vs_parse.c``,
``kinds/virtualserver/records/fast.py``).

Pushed as the X record beside each W record of a plaintext socket
(``servers.fast_records``): the Gateway server's ``location /`` routes by it in
C (``ferryman_gateway_route``, ``dataplane/module/ngx_http_ferryman_gateway.c``),
looking it up by socket and name as ``ferryman_gateway.lua`` looks up W records,
and hands the rest to ``ferryman.gateway_route()``. docs/gateway-api.md,
"Routes the module serves", says what stays in Lua and why.

Gateway API's precedence (``attach._precedence``: Exact, then the longest
PathPrefix, then method, most headers, most query parameters, then route age
and name) becomes NGINX's location choice, which the module makes:

- an Exact path ``p`` is ``= p``;
- a PathPrefix ``p`` (trailing slashes dropped, as the G item's) is ``= p`` and
  ``^~ p/``, so ``/foo`` takes ``/foo`` and ``/foo/bar`` but not ``/foobar``
  (element-wise), and a longer prefix's locations are longer; ``/`` is ``^~ /``;
- ``^~ /`` is always there, slow when no PathPrefix ``/`` serves it, so a
  request no location of ours takes goes to the slow path (which answers 404
  as today) instead of the module's own 404.

A request a location takes can only match (in Gateway API's sense) the
entries of that location and shorter prefixes, which come after them in
precedence order. So the first entry of a location (in the G items' order)
answers it whenever that entry has no condition: a location is fast when its
first entry has no method, header or query match and the module serves it
exactly; otherwise slow, and the Lua router takes the request from the G
items as before (its conditions may fail and fall through to a shorter
prefix, which a location cannot express).

An entry is served when it only proxies: no filter, no timeout, no mirror,
no backend filter, no h2c, no BackendTLSPolicy, every backendRef valid (an
invalid one's share is a 500 the module's splits cannot say), and weights
the module's roll out of 100 gives exactly (each weight x 100 divisible by
their sum: 1:1, 1:3, 80:20; not 1:2). As in the VirtualServer record, "every
other field at its default" decides, so a field added later stays slow.
A host with a RegularExpression or GRPCRoute match gets no record: NGINX tries
regex locations after prefixes, Gateway API's order is not that.
"""

from __future__ import annotations

from collections.abc import Sequence

from ferryman.configs.model import backend_key
from ferryman.configs.record_text import b64_or_dash
from ferryman.configs.served_fields import defaults_except
from ferryman.kinds.gateway.parse.gateway_api import Match
from ferryman.kinds.gateway.records.attach import RouteEntry

# The fields of each model the module serves; any other must keep its default.
# The per-backend tuples (one item per backend, or empty) are checked empty of
# anything: attach gives every backend its (possibly empty) filters.
_ENTRY_FIELDS = frozenset(["route", "rule", "match", "backends", "backend_filters", "h2c", "tls"])
# filters: required, checked empty; timeouts: 0 is "disabled", what none is too.
_RULE_FIELDS = frozenset(
    ["matches", "filters", "backends", "name", "request_timeout", "backend_timeout"]
)
_MATCH_FIELDS = frozenset(["path_type", "path"])
# The module's split roll: 1..100 against the running weights.
_ROLL = 100
# The V record's upstream: round robin, max_fails 1, fail_timeout 10 s,
# NGINX's timeouts, no tries of its own (routes.py's U item).
_UPSTREAM = "0 1 10000 0 0 0 0"


def locations(m: Match) -> list[tuple[str, str]]:
    """The NGINX locations (modifier, path) that take what ``m``'s path matches."""
    if m.path_type == "Exact":
        return [("=", m.path)]
    path = m.path.rstrip("/")
    return [("^~", "/")] if not path else [("=", path), ("^~", path + "/")]


def _splits(entry: RouteEntry, upstream: dict[str, int]) -> str | None:
    """The splits field, None when the module cannot give these shares."""
    positive = [b for b in entry.backends if b[3] > 0]
    shares = [(ns, svc, port, w) for ns, svc, port, w in positive if svc is not None]
    total = sum(w for *_, w in shares)
    if not shares or len(shares) < len(positive) or any(w * _ROLL % total for *_, w in shares):
        return None
    out = [str(len(shares))]
    for ns, svc, port, w in shares:
        key = str(backend_key(ns, svc, str(port)))
        number = upstream.setdefault(key, len(upstream) + 1)
        out.append(f"{w * _ROLL // total} {number}")
    return " ".join(out)


def _served(entry: RouteEntry) -> bool:
    m = entry.match
    return (
        isinstance(m, Match)
        and m.path_type in ("Exact", "PathPrefix")
        and defaults_except(m, _MATCH_FIELDS)
        and defaults_except(entry, _ENTRY_FIELDS)
        and defaults_except(entry.rule, _RULE_FIELDS)
        and not entry.rule.filters
        and not any(entry.backend_filters)
        and not any(entry.h2c)
        and all(tls is None for tls in entry.tls)
        and not entry.rule.request_timeout
        and not entry.rule.backend_timeout
    )


def gateway_fast_record(entries: Sequence[RouteEntry]) -> str | None:
    """The F record of one listener hostname's ``entries`` (in precedence
    order, as the G items); None when the module would serve none of it."""
    firsts: dict[tuple[str, str], RouteEntry] = {}
    for entry in entries:
        m = entry.match
        if not isinstance(m, Match) or m.path_type not in ("Exact", "PathPrefix"):
            return None
        for loc in locations(m):
            firsts.setdefault(loc, entry)
    upstream: dict[str, int] = {}
    items = []
    for (modifier, path), entry in firsts.items():
        splits = _splits(entry, upstream) if _served(entry) else None
        program = "s" if splits is None else f"f 0 {splits}"
        items.append(f"l {'E' if modifier == '=' else 'N'} {b64_or_dash(path)} 0 {program}")
    if all(item.endswith(" s") for item in items):
        return None
    if ("^~", "/") not in firsts:
        items.append(f"l N {b64_or_dash('/')} 0 s")
    ups = [f"u {b64_or_dash(key)} {_UPSTREAM}" for key in upstream]
    return " ".join(["1", *ups, *items])
