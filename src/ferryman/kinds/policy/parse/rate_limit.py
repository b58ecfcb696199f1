"""The ``rateLimit`` Policy: model and NIC's rules (its Go checks and its CRD's patterns)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ferryman.resources import nic_rules as rules
from ferryman.resources.nic_fields import TOO_MANY, Obj, Problem, invalid, required
from ferryman.resources.pcre import regex_value_error

_RATE_LIMIT_KEYS = frozenset(
    [
        "rate",
        "key",
        "delay",
        "noDelay",
        "burst",
        "zoneSize",
        "dryRun",
        "logLevel",
        "rejectCode",
        "scale",
        "condition",
    ]
)
_RATE_KEY_VARIABLES = frozenset(
    {"binary_remote_addr", "request_uri", "uri", "args", "request_method"}
)
_RATE_KEY_SPECIAL = ("arg_", "http_", "cookie_", "jwt_claim_", "apikey_")
LOG_LEVELS = ("info", "notice", "warn", "error")


@dataclass(frozen=True)
class RateLimitCondition:
    variables: tuple[tuple[str, str], ...] = ()  # (variable such as $request_method, match)
    jwt_claim: tuple[str, str] | None = None  # (claim, match)
    default: bool = False


@dataclass(frozen=True)
class RateLimit:
    rate: int  # requests per ``per``
    per: str  # "s" or "m"
    key: str  # text with ${variable}s
    zone_size: int  # bytes
    burst: int | None = None
    delay: int | None = None
    no_delay: bool = False
    dry_run: bool = False
    log_level: str = "error"
    reject_code: int = 503
    scale: bool = False
    condition: RateLimitCondition | None = None


_RATE = re.compile(r"([1-9][0-9]*)r/([sSmM])")


def parse_rate_limit(spec: Obj) -> RateLimit | None:
    r = spec.obj("rateLimit", _RATE_LIMIT_KEYS)
    if r is None:
        return None
    ctx = r.ctx
    zone_size = _zone_size(r)
    rate = r.text("rate")
    m = _RATE.fullmatch(rate)
    if not rate:
        ctx.add(required(r.at("rate")))
    elif not m:
        message = rules.regex_error(
            "must consist of numeric characters followed by a valid rate suffix. 'r/s|r/m",
            r"[1-9]\d*r/[sSmM]",
            "16r/s",
            "32r/m",
            "64r/s",
        )
        ctx.add(invalid(r.at("rate"), rate, message))
    key = r.text("key")
    if not key:
        ctx.add(required(r.at("key")))
    else:
        if bad := rules.escaped_string(
            key, "Hello World! \\n", '\\"${request_uri}\\" is unavailable. \\n'
        ):
            ctx.add(invalid(r.at("key"), key, bad))
        found = rules.variables(key, _RATE_KEY_SPECIAL, _RATE_KEY_VARIABLES)
        ctx.extend([invalid(r.at("key"), v, msg) for v, msg in found])
        ctx.extend(
            [invalid(r.at("key"), key, msg) for msg in rules.token_with_variables(key, "key")]
        )
    delay, burst = _positive(r, "delay"), _positive(r, "burst")
    log_level = r.text("logLevel")
    if log_level and log_level not in LOG_LEVELS:
        ctx.add(invalid(r.at("logLevel"), log_level, f"Accepted values: {', '.join(LOG_LEVELS)}"))
    reject = r.integer("rejectCode")
    if reject is not None and not 400 <= reject <= 599:
        ctx.add(invalid(r.at("rejectCode"), reject, "must be within the range [400-599]"))
    condition = _rate_condition(r)
    if not m or zone_size is None:
        return None
    return RateLimit(
        rate=int(m.group(1)),
        per=m.group(2).lower(),
        key=key,
        zone_size=zone_size,
        burst=burst,
        delay=delay,
        no_delay=r.boolean("noDelay") is True,
        dry_run=r.boolean("dryRun") is True,
        log_level=log_level or "error",
        reject_code=reject or 503,
        scale=r.boolean("scale") is True,
        condition=condition,
    )


def _zone_size(r: Obj) -> int | None:
    """Bytes; NIC reads a bare number as kilobytes and wants at least 32 KB."""
    raw = r.text("zoneSize")
    if not raw:
        r.ctx.add(required(r.at("zoneSize")))
        return None
    if rules.size_bytes(raw) is None:
        r.ctx.add(invalid(r.at("zoneSize"), raw, rules.SIZE_ERROR))
        return None
    m = re.fullmatch(r"\s*([0-9]+)([kKmM]?)\s*", raw)
    assert m is not None  # size_bytes accepted it
    number, megabytes = int(m.group(1)), m.group(2) in "mM" and m.group(2) != ""
    if number == 0 or (not megabytes and number < 32):
        r.ctx.add(invalid(r.at("zoneSize"), raw, "must be greater than 31k"))
        return None
    return number * (1024 * 1024 if megabytes else 1024)


def _positive(o: Obj, key: str) -> int | None:
    n = o.integer(key)
    if n is not None and n <= 0:
        o.ctx.add(invalid(o.at(key), n, "must be positive"))
        return None
    return n


def _rate_condition(r: Obj) -> RateLimitCondition | None:
    c = r.obj("condition", frozenset({"jwt", "variables", "default"}))
    if c is None:
        return None
    jwt = c.obj("jwt", frozenset({"claim", "match"}))
    has_variables = c.raw.get("variables") is not None
    if jwt is None and not has_variables:
        c.ctx.add(required(c.path, "must specify either jwt or variable conditions"))
    if jwt is not None and has_variables:
        c.ctx.add(required(c.path, "only one condition, jwt or variables is allowed"))
    claim = None
    if jwt is not None:
        claim = (jwt.text("claim"), jwt.text("match"))
        _pattern(jwt, "claim", r'([^$\s"\'])*')
        _pattern(jwt, "match", r'([^$\s."\'])*')
        for key, value in zip(("claim", "match"), claim, strict=True):
            jwt.ctx.extend([invalid(jwt.at(key), value, m) for m in rules.token(value, key)])
    variables = []
    for v in c.objs("variables", frozenset({"name", "match"})):
        name, match = v.text("name"), v.text("match")
        if not re.fullmatch(r"\$[a-z_][a-z0-9_]*", name):
            v.ctx.add(
                invalid(v.at("name"), name, "must be an NGINX variable such as $request_method")
            )
        _pattern(v, "match", r'([^\s"\'])*')
        v.ctx.extend([invalid(v.at("match"), match, m) for m in rules.token(match, "match")])
        if (error := regex_value_error(match)) is not None:
            v.ctx.add(invalid(v.at("match"), match, error))
        variables.append((name, match))
    if len(variables) > 1:
        c.ctx.add(Problem(c.at("variables"), TOO_MANY, "must have at most 1 items", len(variables)))
    return RateLimitCondition(tuple(variables), claim, c.boolean("default") is True)


def _pattern(o: Obj, key: str, pattern: str) -> None:
    """A CRD pattern of NIC's, checked here too for manifests mode."""
    value = o.text(key)
    if not value:
        o.ctx.add(required(o.at(key)))
    elif not re.fullmatch(pattern, value):
        o.ctx.add(invalid(o.at(key), value, f"should match '^{pattern}$'"))
