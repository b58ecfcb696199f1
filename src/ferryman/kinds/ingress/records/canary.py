"""ingress-nginx's canary Ingresses, the pure decision (issue 30).

ingress-nginx lets a second Ingress marked ``nginx.ingress.kubernetes.io/canary:
"true"`` take part of the traffic of a main Ingress with the same host and path.
This module holds the parts that need no I/O, so they are tested alone:

- :func:`parse_canary` reads the canary annotations of one Ingress into a
  :class:`Canary` and the problems to say in Warnings;
- :func:`pair_canaries` finds, per (host, path), the main Ingress and the
  canary that joins it; a canary without a main is not served (ingress-nginx
  skips canary Ingresses when it builds servers, and drops an alternative
  backend it cannot attach), and only one canary joins a rule (ingress-nginx's
  "Known Limitations"): the oldest, the others reported;
- :func:`goes_to_canary` is the per-request rule, header > cookie > weight, as
  the data plane applies it; the random draw is passed in so the rule stays pure.

The wiring into the VirtualServer engine (the main host re-rendered with a
header/cookie match and a weighted split when its canary changes) is not part of
this module.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from ferryman.configs.record_text import b64, unquote
from ferryman.kinds.virtualserver.records.locations import source_variable

PREFIX = "nginx.ingress.kubernetes.io/"
# ingress-nginx's default for canary-weight-total (annotations.md "Canary").
DEFAULT_WEIGHT_TOTAL = 100
KEYS = frozenset(
    {
        "canary",
        "canary-by-header",
        "canary-by-header-value",
        "canary-by-header-pattern",
        "canary-by-cookie",
        "canary-weight",
        "canary-weight-total",
    }
)
# Read on a canary Ingress by ingress-nginx too; every other annotation on a
# canary is ignored (inherited from the main Ingress), and said so.
KEPT_ON_CANARY = frozenset(
    {
        "load-balance",
        "upstream-hash-by",
        "affinity",
        "affinity-canary-behavior",
        "affinity-mode",
        "session-cookie-name",
        "session-cookie-path",
        "session-cookie-domain",
        "session-cookie-samesite",
        "session-cookie-conditional-samesite-none",
        "session-cookie-expires",
        "session-cookie-max-age",
        "session-cookie-secure",
        "session-cookie-change-on-failure",
    }
)


@dataclass(frozen=True)
class Canary:
    """The canary annotations of one Ingress, checked."""

    header: str = ""
    header_value: str = ""
    header_pattern: str = ""
    cookie: str = ""
    weight: int = 0
    weight_total: int = DEFAULT_WEIGHT_TOTAL


def _int(annotations: Mapping[str, str], key: str, default: int, problems: list[str]) -> int:
    raw = annotations.get(PREFIX + key)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        problems.append(f"{PREFIX}{key}: {raw!r} is not an integer; {default} used")
        return default
    if value < 0:
        problems.append(f"{PREFIX}{key}: {value} is negative; {default} used")
        return default
    return value


def parse_canary(annotations: Mapping[str, str]) -> tuple[Canary | None, list[str]]:
    """The Ingress's canary, or None when it is not a canary, and the problems."""
    problems: list[str] = []
    if annotations.get(PREFIX + "canary", "").strip().lower() != "true":
        stray = sorted(k for k in KEYS - {"canary"} if PREFIX + k in annotations)
        if stray:
            problems.append(
                f'{", ".join(PREFIX + k for k in stray)} ignored: {PREFIX}canary is not "true"'
            )
        return None, problems
    total = _int(annotations, "canary-weight-total", DEFAULT_WEIGHT_TOTAL, problems)
    if total == 0:
        problems.append(f"{PREFIX}canary-weight-total: 0; {DEFAULT_WEIGHT_TOTAL} used")
        total = DEFAULT_WEIGHT_TOTAL
    weight = _int(annotations, "canary-weight", 0, problems)
    if weight > total:
        problems.append(f"{PREFIX}canary-weight: {weight} is above the total {total}; {total} used")
        weight = total
    header = annotations.get(PREFIX + "canary-by-header", "").strip()
    value = annotations.get(PREFIX + "canary-by-header-value", "")
    pattern = annotations.get(PREFIX + "canary-by-header-pattern", "")
    if (value or pattern) and not header:
        problems.append(
            f"{PREFIX}canary-by-header-value/-pattern ignored: no {PREFIX}canary-by-header"
        )
        value = pattern = ""
    if value and pattern:
        problems.append(
            f"{PREFIX}canary-by-header-pattern ignored: {PREFIX}canary-by-header-value is set"
        )
        pattern = ""
    if pattern:
        try:
            re.compile(pattern)
        except re.error as err:
            # ingress-nginx treats a pattern that fails as not matching.
            problems.append(f"{PREFIX}canary-by-header-pattern: {err}; never matches")
    ignored = sorted(
        key
        for key in annotations
        if key.startswith(PREFIX) and key[len(PREFIX) :] not in KEYS | KEPT_ON_CANARY
    )
    if ignored:
        problems.append(
            f"{', '.join(ignored)} ignored on a canary Ingress: "
            "the main Ingress's annotations apply"
        )
    canary = Canary(
        header=header,
        header_value=value,
        header_pattern=pattern,
        cookie=annotations.get(PREFIX + "canary-by-cookie", "").strip(),
        weight=weight,
        weight_total=total,
    )
    return canary, problems


class Rule(NamedTuple):
    """Where a canary joins its main Ingress."""

    host: str
    path: str


@dataclass(frozen=True)
class Member:
    """One Ingress as the pairing sees it.

    ``order`` sorts oldest first (creationTimestamp, then namespace/name), the
    order ferryman gives every other conflict between Ingresses.
    """

    name: str
    order: tuple[str, str]
    rules: frozenset[Rule]
    canary: Canary | None


@dataclass(frozen=True)
class Pairing:
    """Per rule the main Ingress and its canary; the canaries left out, and why."""

    joined: Mapping[Rule, tuple[str, str, Canary]]
    """rule -> (main Ingress, canary Ingress, canary)."""
    left_out: Mapping[str, tuple[str, ...]]
    """canary Ingress -> the reasons its rules are not served."""


def pair_canaries(members: Iterable[Member]) -> Pairing:
    """Join each canary rule to the oldest main Ingress serving that rule."""
    ordered = sorted(members, key=lambda m: m.order)
    mains: dict[Rule, str] = {}
    for member in ordered:
        if member.canary is None:
            for rule in member.rules:
                mains.setdefault(rule, member.name)
    joined: dict[Rule, tuple[str, str, Canary]] = {}
    left_out: dict[str, list[str]] = {}
    for member in ordered:
        if member.canary is None:
            continue
        for rule in sorted(member.rules):
            main = mains.get(rule)
            if main is None:
                reason = f"{rule.host}{rule.path}: no main Ingress serves it"
            elif rule in joined:
                reason = (
                    f"{rule.host}{rule.path}: {joined[rule][1]} is already its canary "
                    "(one canary per rule)"
                )
            else:
                joined[rule] = (main, member.name, member.canary)
                continue
            left_out.setdefault(member.name, []).append(reason)
    return Pairing(joined, {k: tuple(v) for k, v in left_out.items()})


def goes_to_canary(
    canary: Canary,
    headers: Mapping[str, str],
    cookies: Mapping[str, str],
    draw: int,
) -> bool:
    """Whether one request goes to the canary: header, then cookie, then weight.

    ``headers`` keys are lower case; ``draw`` is uniform in 1..weight_total.
    """
    if canary.header:
        got = headers.get(canary.header.lower())
        if got is not None:
            if canary.header_value:
                if got == canary.header_value:
                    return True
            elif canary.header_pattern:
                try:
                    if re.search(canary.header_pattern, got):
                        return True
                except re.error:
                    # ingress-nginx: a pattern that fails routes to the main.
                    return False
            elif got == "always":
                return True
            elif got == "never":
                return False
    if canary.cookie:
        got = cookies.get(canary.cookie)
        if got == "always":
            return True
        if got == "never":
            return False
    return draw <= canary.weight


class CanaryMatch(NamedTuple):
    """One VirtualServer match condition of a canary (``kinds/virtualserver``):
    ``kind`` ``header`` or ``cookie``, ``value`` in NIC's map syntax as a
    VirtualServer's ``value`` is written (read through ``record_text.unquote``)."""

    kind: str
    name: str
    value: str
    to_canary: bool


def _quoted(value: str) -> str:
    """``value`` as written in NGINX's quoted string, so ``unquote`` gives it back."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("'", "\\'")


def _exactly(value: str) -> str:
    # NIC's map compares a plain value caseless; ingress-nginx compares exactly,
    # so the value is a case-sensitive expression anchored at both ends.
    return _quoted("~^" + re.escape(value) + "$")


def canary_matches(canary: Canary) -> list[CanaryMatch]:
    """The canary as VirtualServer matches, in order; the first that holds
    decides, the weighted split (:func:`canary_percent`) takes the rest. The
    order is ingress-nginx's precedence: header, then cookie."""
    out: list[CanaryMatch] = []
    if canary.header:
        if canary.header_value:
            out.append(CanaryMatch("header", canary.header, _exactly(canary.header_value), True))
        elif canary.header_pattern:
            out.append(
                CanaryMatch("header", canary.header, _quoted("~" + canary.header_pattern), True)
            )
        else:
            out.append(CanaryMatch("header", canary.header, _exactly("always"), True))
            out.append(CanaryMatch("header", canary.header, _exactly("never"), False))
    if canary.cookie:
        out.append(CanaryMatch("cookie", canary.cookie, _exactly("always"), True))
        out.append(CanaryMatch("cookie", canary.cookie, _exactly("never"), False))
    return out


def canary_percent(canary: Canary) -> tuple[int, str | None]:
    """The canary's share of the split in whole percent (a VirtualServer's
    splits are), and a problem when the weight over its total had to be rounded."""
    percent, rest = divmod(canary.weight * 100, canary.weight_total)
    if rest == 0:
        return percent, None
    rounded = round(canary.weight * 100 / canary.weight_total)
    if rounded == 0 and canary.weight > 0:
        rounded = 1  # a canary asked for traffic gets some
    return rounded, (
        f"{PREFIX}canary-weight: {canary.weight}/{canary.weight_total} served as {rounded}%"
    )


def canary_route_fields(canary: Canary, main: str, to_canary: str) -> tuple[str, str]:
    """The R record's ``<matches>`` and ``<default>`` fields
    (``kinds/virtualserver/records/virtualserver.py``) of a main Ingress's path
    that a canary joins; ``main`` and ``to_canary``: the two proxy actions."""
    matches = ";".join(
        f"{b64(source_variable(m.kind, m.name))}.{b64(unquote(m.value))}"
        f">100:{to_canary if m.to_canary else main}"
        for m in canary_matches(canary)
    )
    percent, _ = canary_percent(canary)
    if percent <= 0:
        default = f"100:{main}"
    elif percent >= 100:
        default = f"100:{to_canary}"
    else:
        default = f"{100 - percent}:{main},{percent}:{to_canary}"
    return matches, default
