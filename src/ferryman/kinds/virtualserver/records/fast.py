"""VirtualServer routes ngx_http_ferryman_module serves in C: the ``F`` record.

The Lua slow path routes a VirtualServer host from its ``V`` record
(``kinds/virtualserver/records/virtualserver.py``); each of its entries into Lua costs NGINX CPU per
request. The ``F`` record, pushed beside ``V`` for the same host and read only by
the module (``dataplane/module/ngx_http_ferryman_vs_parse.c`` holds the grammar), lists
every route's location, so the module picks the location as NGINX would, and for
the routes it can serve exactly, their matches, splits and upstreams. Any other
route is ``s`` (slow): the module hands its requests to the slow path, which
routes them from ``V`` as before.

A route is served in C when every part of it is something the module does the
same way as the Lua router: no policy but rate limits and accessControl, no error pages, and
actions that pass to an upstream (``pass``, or ``proxy`` changing nothing) whose
load balancing the module has (round-robin, least_conn; max_fails, fail_timeout,
the three timeouts, next-upstream-tries). The test is "every other field at its
default", so a field added to the models later keeps its routes on the slow path
until this module learns it. A VirtualServer with policies of its own other than
rate limits and accessControl, or with tls.redirect, gets no ``F`` record: all
its requests go to the slow path, as before.

accessControl (``kinds/policy/records/access.py``) is enforced by the module
(``dataplane/module/ngx_http_ferryman_access.c``) on the address the Lua router
checks ($binary_remote_addr, after realip), after the route's rate limits
(NGINX's order: limit_req in the preaccess phase, allow/deny in the access
phase; the Lua router's too), answering 403. A VirtualServer's own one (the
``g`` item) is checked for the requests no route takes too, which the module
then answers (403, else 404), unless the slow path counts those in a rate
limit's zone (no ``h`` item: then no ``g`` either).

Rate limits (``rateLimit`` Policies, ``kinds/policy/records/rate.py``) are enforced by
the module (``dataplane/module/ngx_http_ferryman_limit.c``, NGINX's limit_req
arithmetic) on a route whose only policies they are, when each limit has no
tier condition, a key of the NGINX variables the module reads (not NIC's
``jwt_claim_``/``apikey_`` ones) and numbers within the module's bounds. The
module keeps its buckets in its own zone, the Lua router in its dict, so a NIC
zone (a Policy on one VirtualServer, every route referencing it counting in one
bucket) must be counted by one of them only: a zone any slow route uses keeps
every route using it on the slow path. A VirtualServer's own rate limits
(``spec.policies``, inherited by every route without its own) also count the
requests no route takes: the ``h`` item gives them to the module, which answers
those 404 itself once its limits let them through, unless a slow route counts
in one of their zones (then the slow path counts them all, as before).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ferryman.configs.record_text import b64_or_dash, unquote
from ferryman.configs.served_fields import defaults_except
from ferryman.kinds.policy.records.access import Access, module_field
from ferryman.kinds.policy.records.attach import NONE, Attached
from ferryman.kinds.policy.records.rate import Limit, RateLimits
from ferryman.kinds.virtualserver.parse.action import Action, Pass, Proxy
from ferryman.kinds.virtualserver.parse.match import Match, Split
from ferryman.kinds.virtualserver.parse.route import Route
from ferryman.kinds.virtualserver.parse.virtualserver import VirtualServer
from ferryman.kinds.virtualserver.records.locations import Location, source_variable
from ferryman.resources.nic_upstream import Upstream

_MODIFIERS = {"=": "E", "^~": "N", "": "P", "~": "X", "~*": "I"}
# The fields of each model the module serves; any other must keep its default.
# "listener" too: the module checks a host's listeners before its routes (the
# H record's), so an F record serves a VirtualServer on custom listeners as well.
_VS_FIELDS = frozenset(
    ["meta", "ingress_class", "host", "tls", "policies", "upstreams", "routes", "listener"]
)
_UPSTREAM_FIELDS = frozenset(
    [
        "name",
        "service",
        "service_namespace",
        "port",
        "lb_method",
        "fail_timeout_ms",
        "max_fails",
        "connect_timeout_ms",
        "read_timeout_ms",
        "send_timeout_ms",
        "next_upstream",
        "next_upstream_tries",
        "use_cluster_ip",  # only the key differs (the endpoint set of the ClusterIP)
    ]
)
# policies: served as the route's effective ones (FastRoute.attached).
_ROUTE_FIELDS = frozenset(["path", "action", "splits", "matches", "policies"])
_MATCH_FIELDS = frozenset(["conditions", "action", "splits"])
_LB_METHODS = {"round_robin": "0", "least_conn": "1"}
# NGINX's proxy_next_upstream default, which the fast location has.
_NEXT_UPSTREAM = frozenset(["error", "timeout"])
# NIC's defaults on open-source NGINX (as the V record's).
_MAX_FAILS = 1
_FAIL_TIMEOUT_MS = 10_000
# NGINX's log levels (NGX_LOG_*), as the module reads a rate limit's logLevel.
_LOG_LEVELS = {"error": 4, "warn": 5, "notice": 6, "info": 7}
# The key variables the module reads (ngx_http_ferryman_limit_key.c's list); NIC's
# jwt_claim_ and apikey_ ones only the Lua router has.
_KEY_VARIABLES = frozenset(
    ["binary_remote_addr", "request_uri", "uri", "args", "request_method", "remote_addr"]
)
_KEY_PREFIXES = ("arg_", "http_", "cookie_")
# ferryman_policy_vars.lua's template: ${name}, name of [A-Za-z0-9_].
_KEY_VARIABLE = re.compile(r"\$\{([A-Za-z0-9_]+)\}")
# The module's bounds: a rate (thousandths of r/s) times milliseconds, and
# burst and delay in thousandths, stay within 64 bits.
_MAX_RATE = 10**12
_MAX_COUNT = 999_999_999


@dataclass(frozen=True)
class FastRoute:
    """One route as the V record carries it: its location, the route, the V
    record's policy field (empty: none) and the upstream numbers its names mean."""

    location: Location
    route: Route
    policies: str
    upstreams: Mapping[str, int]
    # The policies ``policies`` names (``vs_policies.effective``).
    attached: Attached = NONE


def _ms(ms: int | None) -> str:
    return str(ms or 0)


def _upstream(key: str, u: Upstream) -> str | None:
    """The ``u`` item, None when the module cannot balance it as the Lua router does."""
    method = u.lb_method.method if u.lb_method else "round_robin"
    if (
        method not in _LB_METHODS
        or not defaults_except(u, _UPSTREAM_FIELDS)
        or (u.next_upstream and set(u.next_upstream) != _NEXT_UPSTREAM)
    ):
        return None
    return " ".join(
        [
            "u",
            b64_or_dash(key),
            _LB_METHODS[method],
            str(_MAX_FAILS if u.max_fails is None else u.max_fails),
            str(_FAIL_TIMEOUT_MS if u.fail_timeout_ms is None else u.fail_timeout_ms),
            _ms(u.connect_timeout_ms),
            _ms(u.read_timeout_ms),
            _ms(u.send_timeout_ms),
            str(u.next_upstream_tries),
        ]
    )


def module_condition(variable: str, value: str) -> str:
    """vs_routes.condition_holds's reading of ``value``, for the module (an
    Ingress's canary matches are written with it too)."""
    negate = value.startswith("!")
    if negate:
        value = value[1:]
    if value.startswith("~*"):
        kind, value = "i", value[2:]
    elif value.startswith("~"):
        kind, value = "r", value[1:]
    else:
        kind = "s"
        if value.startswith("\\"):
            value = value[1:]
    return f"{int(negate)} {kind} {b64_or_dash(variable)} {b64_or_dash(value)}"


class _Unserved(Exception):
    """A part of a route the module does not serve: the route is slow."""


def _splits(
    action: Action | None, splits: Sequence[Split], upstreams: Mapping[str, int], fast: set[int]
) -> str:
    outcome = [(100, action)] if action is not None else [(s.weight, s.action) for s in splits]
    out = [str(len(outcome))]
    for weight, a in outcome:
        if isinstance(a, Proxy) and a == Proxy(a.upstream):
            a = Pass(a.upstream)  # a proxy that changes nothing passes
        if not isinstance(a, Pass) or upstreams.get(a.upstream) not in fast:
            raise _Unserved
        out.append(f"{weight} {upstreams[a.upstream]}")
    return " ".join(out)


def _match(m: Match, upstreams: Mapping[str, int], fast: set[int]) -> str:
    if not defaults_except(m, _MATCH_FIELDS) or not m.conditions:
        raise _Unserved
    conditions = [
        module_condition(source_variable(c.kind, c.name), unquote(c.value)) for c in m.conditions
    ]
    return " ".join(
        [str(len(conditions)), *conditions, _splits(m.action, m.splits, upstreams, fast)]
    )


def _key(key: str) -> str | None:
    """The key as the module's parts (literals and variables alternating, each a
    string), None when a variable is not one the module reads."""
    parts = []
    start = 0
    for m in _KEY_VARIABLE.finditer(key):
        name = m.group(1).lower()
        if name not in _KEY_VARIABLES and not name.startswith(_KEY_PREFIXES):
            return None
        parts += [key[start : m.start()], name]
        start = m.end()
    parts.append(key[start:])
    return " ".join([str(len(parts)), *(b64_or_dash(p) for p in parts)])


def _limit(limit: Limit) -> str:
    key = _key(limit.key)
    if (
        limit.variable
        or limit.exempt  # ingress-nginx's limit-allowlist: the Lua path's only
        or key is None
        or not 0 < limit.rate <= _MAX_RATE
        or not 0 <= limit.burst <= _MAX_COUNT
        or limit.delay > _MAX_COUNT
    ):
        raise _Unserved
    nodelay = limit.delay < 0
    delay = 0 if nodelay else limit.delay
    return f"{b64_or_dash(limit.zone)} {limit.rate} {limit.burst} {delay} {int(nodelay)} {key}"


def _served(attached: Attached) -> tuple[RateLimits | None, Access | None]:
    """The rate limits and accessControl of policies that must be those only
    (at least one of them)."""
    configs = attached.configs
    rate = configs.get(RateLimits)
    access = configs.get(Access)
    if attached.error or not configs or set(configs) - {RateLimits, Access}:
        raise _Unserved
    return (
        rate if isinstance(rate, RateLimits) else None,
        access if isinstance(access, Access) else None,
    )


def _rate_limits(rate: RateLimits) -> str:
    """The limits field."""
    if rate.log_level not in _LOG_LEVELS or not rate.limits:
        raise _Unserved
    limits = [_limit(limit) for limit in rate.limits]
    head = f"{int(rate.dry_run)} {_LOG_LEVELS[rate.log_level]} {rate.reject_code}"
    return " ".join([head, str(len(limits)), *limits])


def _kind(r: FastRoute) -> str:
    """The ``l`` item's kind and its policies: ``f`` (none), ``q <limits>``,
    and either after ``a <access>``."""
    if not r.policies:
        return "f"
    rate, access = _served(r.attached)
    kind = f"q {_rate_limits(rate)}" if rate else "f"
    return f"a {module_field(access)} {kind}" if access else kind


def _host(spec: Attached) -> list[str]:
    """The ``h`` and ``g`` items of the VirtualServer's own policies."""
    if spec == NONE:
        return []
    rate, access = _served(spec)
    return ([f"h {_rate_limits(rate)}"] if rate else []) + (
        [f"g {module_field(access)}"] if access else []
    )


def _zones(attached: Attached) -> frozenset[str]:
    """The NIC zones (rate limits' buckets) ``attached`` counts in."""
    rate = attached.configs.get(RateLimits)
    return (
        frozenset(limit.zone for limit in rate.limits)
        if isinstance(rate, RateLimits)
        else frozenset()
    )


def _location(r: FastRoute, fast: set[int], slow_zones: frozenset[str]) -> str:
    loc = r.location
    head = f"l {_MODIFIERS[loc.modifier]} {b64_or_dash(loc.path)} {int(loc.proxies)}"
    route = r.route
    try:
        if not defaults_except(route, _ROUTE_FIELDS) or _zones(r.attached) & slow_zones:
            raise _Unserved
        kind = _kind(r)
        matches = [_match(m, r.upstreams, fast) for m in route.matches]
        default = _splits(route.action, route.splits, r.upstreams, fast)
    except _Unserved:
        return f"{head} s"
    return " ".join([head, kind, str(len(matches)), *matches, default])


def _items(routes: Sequence[FastRoute], fast: set[int], spec: Attached) -> list[str]:
    """The ``h`` and ``g`` items (none when the slow path counts the requests no
    route takes) and every route's ``l`` item; a zone the slow path counts in (a
    slow route's, or the no-route requests') makes every route counting in it
    slow (repeated: such a route's other zones are then slow too)."""
    host_zones = _zones(spec)
    slow_zones: frozenset[str] = frozenset()
    while True:
        host_slow = bool(host_zones & slow_zones)
        host = [] if host_slow else _host(spec)
        locations = [_location(r, fast, slow_zones) for r in routes]
        now_slow = set(host_zones if host_slow else ())
        for r, loc in zip(routes, locations, strict=True):
            if loc.endswith(" s"):
                now_slow |= _zones(r.attached)
        if now_slow == slow_zones:
            return host + locations
        slow_zones = frozenset(now_slow)


def fast_record(
    vs: VirtualServer,
    upstreams: Sequence[tuple[str, Upstream]],
    routes: Sequence[FastRoute],
    spec: Attached = NONE,
) -> str | None:
    """The F record of ``vs``: ``upstreams`` numbered from 1 (backend key, upstream),
    ``routes`` as the V record has them and ``spec`` its own policies; None when
    the module serves none of it."""
    if {f.name for f in dataclasses.fields(vs)} != _VS_FIELDS or (
        vs.tls is not None and vs.tls.redirect is not None
    ):
        return None
    if vs.policies:
        try:
            _host(spec)  # policies the module enforces, or no record
        except _Unserved:
            return None
    items = ["1"]
    fast: set[int] = set()
    for number, (key, u) in enumerate(upstreams, start=1):
        # A slow upstream is still an item: the numbers stay those of the V record.
        item = _upstream(key, u)
        if item is not None:
            fast.add(number)
        items.append(item or f"u {b64_or_dash(key)} 0 0 0 0 0 0 0")
    found = _items(routes, fast, spec if vs.policies else NONE)
    if all(item.endswith(" s") for item in found if item.startswith("l ")):
        return None
    return " ".join(items + found)
