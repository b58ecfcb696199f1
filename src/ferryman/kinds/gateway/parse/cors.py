"""An HTTPRoute's CORS filter (standard channel since v1.3): the typed view and
the CRD's validation, for manifests mode where no API server applies it.

Kept apart from the other filters because its rules are its own: origins are
``*`` or ``http(s)://host[:port]`` with an optional leading ``*.`` label (or a
host of just ``*``), methods one of the nine or ``*``, headers HTTP tokens, and
``*`` never beside anything else in a list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ferryman.resources.nic_fields import Obj, invalid, required

KEYS = frozenset(
    {"allowOrigins", "allowCredentials", "allowMethods", "allowHeaders", "exposeHeaders", "maxAge"}
)
# The CRD's patterns (v1.6.3).
_ORIGIN_RE = re.compile(
    r"^\*$|^https?://(((\*\.)?([a-zA-Z0-9\-]+\.)*[a-zA-Z0-9-]+|\*)(:([0-9]{1,5}))?)$"
)
_TOKEN_RE = re.compile(r"^[A-Za-z0-9!#$%&'*+\-.^_`|~]+$")
_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH")
MAX_ITEMS = {"allowOrigins": 64, "allowMethods": 9, "allowHeaders": 64, "exposeHeaders": 64}
DEFAULT_MAX_AGE = 5


@dataclass(frozen=True)
class Cors:
    allow_origins: tuple[str, ...] = ()
    allow_credentials: bool = False
    allow_methods: tuple[str, ...] = ()
    allow_headers: tuple[str, ...] = ()
    expose_headers: tuple[str, ...] = ()
    max_age: int = DEFAULT_MAX_AGE


def parse_cors(filter_: Obj) -> Cors:
    """The ``cors`` field of a filter of type CORS (problems go to its context)."""
    ctx = filter_.ctx
    o = filter_.obj("cors", KEYS)
    if o is None:
        ctx.add(required(filter_.at("cors"), "filter.cors must be specified for CORS filter.type"))
        return Cors()
    lists: dict[str, tuple[str, ...]] = {}
    for key, limit in MAX_ITEMS.items():
        items = o.str_items(key) or []
        if len(items) > limit:
            ctx.add(invalid(o.at(key), len(items), f"must have at most {limit} items"))
        values = tuple(v for _, v in items)
        if "*" in values and len(values) > 1 and key != "exposeHeaders":
            name = key[0].upper() + key[1:]
            ctx.add(invalid(o.at(key), list(values), f"{name} cannot contain '*' alongside other"))
        if len(set(values)) != len(values):
            ctx.add(invalid(o.at(key), list(values), "must not contain duplicate items"))
        for where, value in items:
            if key == "allowOrigins":
                ok = len(value) <= 253 and bool(_ORIGIN_RE.fullmatch(value))
            elif key == "allowMethods":
                ok = value in _METHODS or value == "*"
            else:
                ok = len(value) <= 256 and bool(_TOKEN_RE.fullmatch(value))
            if not ok:
                ctx.add(invalid(where, value, f"is not a valid {key[:-1]}"))
        lists[key] = values
    max_age = o.integer("maxAge")
    if max_age is not None and max_age < 1:
        ctx.add(invalid(o.at("maxAge"), max_age, "should be greater than or equal to 1"))
    return Cors(
        allow_origins=lists["allowOrigins"],
        allow_credentials=bool(o.boolean("allowCredentials")),
        allow_methods=lists["allowMethods"],
        allow_headers=lists["allowHeaders"],
        expose_headers=lists["exposeHeaders"],
        max_age=DEFAULT_MAX_AGE if max_age is None else max_age,
    )
