"""How a route chooses among actions: weighted splits and conditional matches, with NIC's rules."""

from __future__ import annotations

from dataclasses import dataclass

from ferryman.kinds.virtualserver.parse.action import (
    ACTION_KEYS,
    Action,
    Scope,
    parse_action,
)
from ferryman.resources import nic_rules as rules
from ferryman.resources.nic_fields import Obj, invalid, required
from ferryman.resources.pcre import regex_value_error

SPLIT_KEYS = frozenset({"weight", "action"})
MATCH_KEYS = frozenset({"conditions", "action", "splits"})
_CONDITION_KEYS = frozenset({"header", "cookie", "argument", "variable", "value"})
# NGINX variables NIC allows in a condition (NIC's list, unchanged).
CONDITION_VARIABLES = frozenset(
    [
        "$args",
        "$http2",
        "$https",
        "$remote_addr",
        "$remote_port",
        "$query_string",
        "$request",
        "$request_body",
        "$request_uri",
        "$request_method",
        "$scheme",
    ]
)


@dataclass(frozen=True)
class Split:
    weight: int
    action: Action


@dataclass(frozen=True)
class Condition:
    kind: str  # "header", "cookie", "argument" or "variable"
    name: str
    value: str


@dataclass(frozen=True)
class Match:
    conditions: tuple[Condition, ...]
    action: Action | None
    splits: tuple[Split, ...]


def parse_splits(route: Obj, scope: Scope) -> tuple[Split, ...]:
    ctx = route.ctx
    items = route.objs("splits", SPLIT_KEYS)
    if len(items) < 2:
        ctx.add(invalid(route.at("splits"), "", "must include at least 2 splits"))
        return ()
    out, total = [], 0
    for s in items:
        weight = s.integer("weight") or 0
        if not 0 <= weight <= 100:
            ctx.add(invalid(s.at("weight"), weight, rules.range_error(0, 100)))
        action_obj = s.obj("action", ACTION_KEYS)
        if action_obj is None:
            ctx.add(required(s.at("action")))
        elif (action := parse_action(action_obj, scope, internal=True)) is not None:
            out.append(Split(weight, action))
        total += weight
    if total != 100:
        ctx.add(
            invalid(
                route.at("splits"), "", "the sum of the weights of all splits must be equal to 100"
            )
        )
    return tuple(out)


def parse_match(m: Obj, scope: Scope) -> Match:
    ctx = m.ctx
    conditions = []
    items = m.objs("conditions", _CONDITION_KEYS)
    if not items:
        ctx.add(required(m.at("conditions"), "must specify at least one condition"))
    for c in items:
        if (condition := _condition(c)) is not None:
            conditions.append(condition)
    action: Action | None = None
    splits: tuple[Split, ...] = ()
    count = 0
    if (a := m.obj("action", ACTION_KEYS)) is not None:
        action = parse_action(a, scope, internal=True)
        count += 1
    if m.has("splits") and m.raw["splits"] != []:
        splits = parse_splits(m, scope)
        count += 1
    if count != 1:
        ctx.add(invalid(m.path, "", "must specify exactly one of `action` or `splits`"))
    return Match(tuple(conditions), action, splits)


def _condition(c: Obj) -> Condition | None:
    ctx = c.ctx
    before = len(ctx.problems)
    found = []
    for kind in ("header", "cookie", "argument", "variable"):
        name = c.text(kind)
        if not name:
            continue
        found.append((kind, name))
        where = c.at(kind)
        if kind == "header":
            ctx.extend([invalid(where, name, m) for m in rules.http_header_name(name)])
        elif kind == "cookie":
            ctx.extend([invalid(where, name, m) for m in rules.cookie_name(name)])
        elif kind == "argument":
            ctx.extend([invalid(where, name, m) for m in rules.argument_name(name)])
        elif not name.startswith("$"):
            ctx.add(invalid(where, name, "must start with `$`"))
        elif name not in CONDITION_VARIABLES:
            ctx.add(invalid(where, name, "is not allowed or is not an NGINX variable"))
    if len(found) != 1:
        ctx.add(
            invalid(
                c.path,
                "",
                "must specify exactly one of: `header`, `cookie`, `argument` or `variable`",
            )
        )
    value = c.text("value")
    if bad := rules.escaped_string(value, "value-123"):
        ctx.add(invalid(c.at("value"), value, bad))
    ctx.extend([invalid(c.at("value"), value, m) for m in rules.single_line(value)])
    if (error := regex_value_error(value.removeprefix("!"))) is not None:
        ctx.add(invalid(c.at("value"), value, error))
    if len(ctx.problems) != before:
        return None
    return Condition(found[0][0], found[0][1], value)
