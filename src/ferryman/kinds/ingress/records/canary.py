"""ingress-nginx's canary Ingresses, the pure decision (issue 30).

ingress-nginx lets a second Ingress marked ``nginx.ingress.kubernetes.io/canary:
"true"`` take part of the traffic of a main Ingress with the same host and path.
This module holds the parts that need no I/O, so they are tested alone (the
annotations are read by ``parse/ingress_nginx_canary.py``):

- :func:`pair_canaries` finds, per (host, path), the main Ingress and the
  canary that joins it; a canary without a main is not served (ingress-nginx
  skips canary Ingresses when it builds servers, and drops an alternative
  backend it cannot attach), and only one canary joins a rule (ingress-nginx's
  "Known Limitations"): the oldest, the others reported;
- :func:`goes_to_canary` is the per-request rule, header > cookie > weight, as
  the data plane applies it; the random draw is passed in so the rule stays pure.

- :func:`canary_route_fields` the main path's route as the VirtualServer engine
  reads it: the header/cookie matches, then the weighted split;
  :func:`canary_module_fields` the same for the module's F record.

``canary_host.py`` joins these to the translator (the main's host re-rendered
when its canary changes).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from ferryman.configs.record_text import b64, unquote
from ferryman.kinds.ingress.parse.ingress_nginx_canary import PREFIX, Canary
from ferryman.kinds.virtualserver.records.fast import module_condition
from ferryman.kinds.virtualserver.records.locations import source_variable


class Rule(NamedTuple):
    """Where a canary joins its main Ingress: ingress-nginx matches host, path
    and pathType (its mergeAlternativeBackends)."""

    host: str
    path: str
    path_type: str = "Prefix"


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


def _compiles(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True


def canary_matches(canary: Canary) -> list[CanaryMatch]:
    """The canary as VirtualServer matches, in order; the first that holds
    decides, the weighted split (:func:`canary_percent`) takes the rest. The
    order is ingress-nginx's precedence: header, then cookie."""
    out: list[CanaryMatch] = []
    if canary.header:
        if canary.header_value:
            out.append(CanaryMatch("header", canary.header, _exactly(canary.header_value), True))
        elif canary.header_pattern:
            if _compiles(canary.header_pattern):  # else it never matches (parse said so)
                pattern = _quoted("~" + canary.header_pattern)
                out.append(CanaryMatch("header", canary.header, pattern, True))
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


def _split(percent: int, main: int, to_canary: int) -> str:
    if percent <= 0:
        return f"1 100 {main}"
    if percent >= 100:
        return f"1 100 {to_canary}"
    return f"2 {100 - percent} {main} {percent} {to_canary}"


def canary_module_fields(canary: Canary, main: int, to_canary: int) -> str:
    """The same route as :func:`canary_route_fields` in the F record's grammar
    (``dataplane/module/ngx_http_ferryman_vs_parse.c``): ``<n> <match>...
    <splits>``, ``main`` and ``to_canary`` the upstreams' numbers. The module
    reads conditions and rolls splits as ferryman_vs.lua does, so the main's
    path stays on the fast path with its canary."""
    matches = [
        "1 "
        + module_condition(source_variable(m.kind, m.name), unquote(m.value))
        + f" 1 100 {to_canary if m.to_canary else main}"
        for m in canary_matches(canary)
    ]
    percent, _ = canary_percent(canary)
    return " ".join([str(len(matches)), *matches, _split(percent, main, to_canary)])
