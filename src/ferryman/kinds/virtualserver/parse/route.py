"""VirtualServer ``routes`` and VirtualServerRoute ``subroutes``: paths and NIC's route rules."""

from __future__ import annotations

from dataclasses import dataclass

from ferryman.kinds.virtualserver.parse.action import (
    ACTION_KEYS,
    ERROR_PAGE_KEYS,
    Action,
    ErrorPage,
    Scope,
    parse_action,
    parse_error_page,
)
from ferryman.kinds.virtualserver.parse.match import (
    MATCH_KEYS,
    Match,
    Split,
    parse_match,
    parse_splits,
)
from ferryman.resources import nic_rules as rules
from ferryman.resources.nic_fields import (
    Obj,
    Problem,
    duplicate,
    forbidden,
    invalid,
    not_supported,
    required,
)
from ferryman.resources.pcre import pcre_error
from ferryman.resources.policy_ref import PolicyRef

ROUTE_KEYS = frozenset(
    [
        "path",
        "policies",
        "route",
        "routeSelector",
        "action",
        "splits",
        "matches",
        "errorPages",
        "location-snippets",
        "add-header-inherit",
        "dos",
    ]
)
POLICY_REF_KEYS = frozenset({"name", "namespace"})
# Longest first: "~*" before "~", "^~" before nothing.
MODIFIERS = ("~*", "~", "^~", "=")
_SNIPPETS = "snippets are raw NGINX configuration, which ferryman never accepts from a resource"


@dataclass(frozen=True)
class RoutePath:
    """A route's path as NGINX's location takes it; ``str()`` is NIC's normalised form."""

    modifier: str  # "" prefix, "=" exact, "~" regex, "~*" case-insensitive regex, "^~" prefix
    value: str  # the path or the regular expression, without the modifier

    def __str__(self) -> str:
        return self.modifier + self.value

    @property
    def category(self) -> str:
        """NIC's modifier category: routes sharing a VirtualServerRoute must agree on it."""
        if self.modifier.startswith("~"):
            return "regex"
        return {"=": "exact", "^~": "longest-prefix"}.get(self.modifier, "prefix")


@dataclass(frozen=True)
class RouteRef:
    """``route: [namespace/]name``: a delegation to a VirtualServerRoute."""

    namespace: str
    name: str


@dataclass(frozen=True)
class Route:
    path: RoutePath
    policies: tuple[PolicyRef, ...] = ()
    action: Action | None = None
    splits: tuple[Split, ...] = ()
    matches: tuple[Match, ...] = ()
    route: RouteRef | None = None
    route_selector: tuple[tuple[str, str], ...] = ()  # matchLabels, when delegating by labels
    error_pages: tuple[ErrorPage, ...] = ()
    # routeSelector.matchExpressions was given: NIC selects by matchLabels alone
    # (its LabelSelector is built from them), so they are ignored, with a Warning.
    selector_expressions: bool = False


def split_path(raw: str) -> RoutePath:
    """NIC's NormalizePath, kept apart: whitespace after a modifier is dropped."""
    for modifier in MODIFIERS:
        if raw.startswith(modifier):
            return RoutePath(modifier, raw[len(modifier) :].lstrip())
    return RoutePath("", raw)


def path_problems(where: str, raw: str) -> list[Problem]:
    if not raw:
        return [required(where)]
    path = split_path(raw)
    if path.modifier.startswith("~"):
        return _regex_problems(where, raw, path.value)
    if path.modifier == "" and not raw.startswith("/"):
        return [invalid(where, raw, "must start with /, ~, = or ^~")]
    if not path.value:
        return [required(where)]
    return [invalid(where, raw, m) for m in rules.path(path.value)]


def _regex_problems(where: str, raw: str, regex: str) -> list[Problem]:
    if (error := pcre_error(regex)) is not None:
        return [invalid(where, raw, f"must be a valid regular expression: {error}")]
    if bad := rules.escaped_string(regex, "*.jpg", "^/images/image_*.png$"):
        return [invalid(where, raw, bad)]
    # NIC writes the location's regex unquoted, so NGINX would refuse these too.
    return [invalid(where, raw, m) for m in rules.regular_expression(regex)]


def parse_policy_refs(o: Obj, namespace: str) -> tuple[PolicyRef, ...]:
    out, seen = [], set()
    for p in o.objs("policies", POLICY_REF_KEYS):
        name, ns = p.text("name"), p.text("namespace")
        key = f"{ns or namespace}/{name}"
        if key in seen:
            p.ctx.add(duplicate(p.path, key))
        seen.add(key)
        before = len(p.ctx.problems)
        if not name:
            p.ctx.add(required(p.at("name")))
        p.ctx.extend(
            [invalid(p.at("name"), name, m) for m in rules.dns1123_subdomain(name) if name]
        )
        p.ctx.extend([invalid(p.at("namespace"), ns, m) for m in rules.dns1123_label(ns) if ns])
        if len(p.ctx.problems) == before:
            out.append(PolicyRef(name, ns or namespace))
    return tuple(out)


def parse_route(r: Obj, upstreams: frozenset[str], namespace: str, subroute: bool) -> Route | None:
    """One route (or subroute, where ``route`` is not allowed): NIC's validateRoute."""
    ctx = r.ctx
    before = len(ctx.problems)
    raw_path = r.text("path")
    ctx.extend(path_problems(r.at("path"), raw_path))
    path = split_path(raw_path)
    policies = parse_policy_refs(r, namespace)
    for key, reason in (
        ("location-snippets", _SNIPPETS),
        ("add-header-inherit", "NGINX's add_header_inherit is not used by ferryman"),
        ("dos", "NGINX App Protect DoS needs NGINX Plus"),
    ):
        if r.text(key):
            ctx.add(not_supported(r.at(key), reason))
    scope = Scope(upstreams, raw_path)
    count = 0
    action = None
    if (a := r.obj("action", ACTION_KEYS)) is not None:
        action = parse_action(a, scope, internal=False)
        count += 1
    splits: tuple[Split, ...] = ()
    if r.raw.get("splits"):
        splits = parse_splits(r, scope)
        count += 1
    matches = tuple(parse_match(m, scope) for m in r.objs("matches", MATCH_KEYS))
    selector: tuple[tuple[str, str], ...] = ()
    expressions = False
    if (s := r.obj("routeSelector", frozenset({"matchLabels", "matchExpressions"}))) is not None:
        selector = _route_selector(s, subroute)
        expressions = bool(s.raw.get("matchExpressions"))
        count += 1
    error_pages = tuple(
        page for e in r.objs("errorPages", ERROR_PAGE_KEYS) if (page := parse_error_page(e))
    )
    ref = None
    if delegate := r.text("route"):
        if subroute:
            ctx.add(forbidden(r.at("route"), "is not allowed"))
        else:
            ctx.extend(
                [invalid(r.at("route"), delegate, m) for m in rules.qualified_name(delegate)]
            )
            ns, _, name = delegate.rpartition("/")
            ref = RouteRef(ns or namespace, name)
            count += 1
    if count != 1:
        message = "must specify exactly one of `action`, `splits`, `route` or `routeSelector`"
        if subroute or matches:
            message = "must specify exactly one of `action` or `splits`"
        ctx.add(invalid(r.path, "", message))
    if len(ctx.problems) != before:
        return None
    return Route(path, policies, action, splits, matches, ref, selector, error_pages, expressions)


def _route_selector(s: Obj, subroute: bool) -> tuple[tuple[str, str], ...]:
    ctx = s.ctx
    if subroute:
        ctx.add(forbidden(s.path, "is not allowed"))
    labels = s.str_map("matchLabels") or {}
    where = s.at("matchLabels")
    if not labels:
        ctx.add(required(where, "must specify at least one label"))
    for k, v in labels.items():
        ctx.extend([invalid(where, k, m) for m in rules.qualified_name(k)])
        ctx.extend([invalid(where, v, m) for m in rules.label_value(v)])
        if not v:
            ctx.add(invalid(f"{where}[{k}]", v, "label value must be non-empty"))
    return tuple(sorted(labels.items()))


def parse_routes(
    spec: Obj, key: str, upstreams: frozenset[str], namespace: str
) -> tuple[Route, ...]:
    """Each valid route; NIC reports a duplicate normalised path only among valid ones."""
    out, seen = [], set()
    for r in spec.objs(key, ROUTE_KEYS):
        route = parse_route(r, upstreams, namespace, subroute=key == "subroutes")
        if route is None:
            continue
        # NGINX refuses "location /a" beside "location ^~ /a" (one location,
        # twice): a duplicate too, which NIC lets through to a failing reload.
        key = str(route.path) if route.path.modifier != "^~" else route.path.value
        if key in seen:
            r.ctx.add(duplicate(r.at("path"), r.text("path")))
            continue
        seen.add(key)
        out.append(route)
    return tuple(out)
