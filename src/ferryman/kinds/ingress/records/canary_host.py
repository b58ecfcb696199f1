"""A host's canary Ingresses joined to its main Ingress (ingress-nginx's canary, issue 30).

The main Ingress of a host is the host's owner (``engine/configuration.py``:
one owner per host, the oldest); a canary claims no host. Both read the
host's canaries through ``reads.Reads.canaries`` (by host), so a canary's
change translates its main again and the main's its canaries; the main's
paths that a canary joins are written with the canary's matches and split
(``as_virtualserver.py``, ``canary.py``'s :func:`canary_route_fields`).

The pairing (``canary.pair_canaries``) runs on both sides with the same
members, so the main's records and the canary's Event agree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ferryman.kinds.ingress.parse.ingress import Ingress, ServiceBackend
from ferryman.kinds.ingress.parse.ingress_nginx_canary import Canary
from ferryman.kinds.ingress.records.canary import (
    Member,
    Pairing,
    Rule,
    canary_percent,
    pair_canaries,
)


@dataclass(frozen=True)
class Joined:
    """A canary that joins one path of its main Ingress."""

    name: str  # the canary Ingress, namespace/name
    namespace: str
    backend: ServiceBackend
    canary: Canary


# The paths of one host a canary joins: (path, pathType) -> the canary.
JoinedPaths = dict[tuple[str, str], Joined]


def _key(ing: Ingress) -> str:
    return f"{ing.meta.namespace}/{ing.meta.name}"


def _order(ing: Ingress) -> tuple[str, str]:
    # No timestamp sorts after every timestamp ("~" after the digits), as
    # engine/configuration.py orders them.
    return (ing.meta.creation_timestamp or "~", _key(ing))


def _member(ing: Ingress, host: str) -> Member:
    rules = frozenset(
        Rule(host, p.path, p.path_type) for r in ing.rules if r.host == host for p in r.paths
    )
    return Member(_key(ing), _order(ing), rules, ing.canary)


def paired(ingresses: Iterable[Ingress]) -> Pairing:
    """The canaries of ``ingresses`` (one class) paired to their mains over every
    host, as a run would pair them (``ferryman migrate``); mergeable Ingresses
    take no canary."""
    return pair_canaries(
        Member(
            _key(i),
            _order(i),
            frozenset(Rule(r.host, p.path, p.path_type) for r in i.rules for p in r.paths),
            i.canary,
        )
        for i in ingresses
        if i.mergeable is None
    )


def rule_hosts(ing: Ingress | None) -> set[str]:
    """The hosts of ``ing``'s rules (a canary's, whose hosts it does not claim)."""
    return {r.host for r in ing.rules} if ing is not None else set()


def joined_paths(main: Ingress, host: str, canaries: Iterable[Ingress]) -> JoinedPaths:
    """The paths of ``main``'s ``host`` that a canary joins, (path, pathType) -> the canary."""
    if main.canary is not None or main.mergeable is not None:
        return {}  # a mergeable host takes no canary (not yet)
    found = {_key(c): c for c in canaries if c.canary is not None}
    pairing = pair_canaries([_member(main, host), *(_member(c, host) for c in found.values())])
    out: JoinedPaths = {}
    for rule, (main_name, canary_name, canary) in pairing.joined.items():
        if main_name != _key(main):
            continue
        ing = found[canary_name]
        backend = next(
            p.backend
            for r in ing.rules
            if r.host == host
            for p in r.paths
            if (p.path, p.path_type) == (rule.path, rule.path_type)
        )
        out[(rule.path, rule.path_type)] = Joined(canary_name, ing.meta.namespace, backend, canary)
    return out


def canary_outcome(
    canary: Ingress, mains: Mapping[str, Ingress | None], canaries: Mapping[str, list[Ingress]]
) -> tuple[list[str], list[str]]:
    """What a canary Ingress's Event says: the paths it joins (``host/path of
    namespace/main``) and the reasons the others are not served; ``mains``: per
    host of its rules it may serve, the host's owner (None: none, or not an
    Ingress of the class), ``canaries`` per host the canary Ingresses served there."""
    served: list[str] = []
    reasons: list[str] = []
    for host in sorted(mains):
        main = mains.get(host)
        members = [_member(c, host) for c in canaries.get(host, []) if c.canary is not None]
        if all(m.name != _key(canary) for m in members):
            members.append(_member(canary, host))
        if main is not None and main.canary is None and main.mergeable is None:
            members.append(_member(main, host))
        elif main is not None and main.mergeable is not None:
            reasons.append(f"{host}: its main Ingress is mergeable (a canary joins a regular one)")
            continue
        pairing = pair_canaries(members)
        reasons += pairing.left_out.get(_key(canary), ())
        served += [
            f"{rule.host}{rule.path} of {main_name}"
            for rule, (main_name, name, _) in sorted(pairing.joined.items())
            if name == _key(canary)
        ]
    return served, reasons


def canary_event(canary: Ingress, served: list[str], reasons: list[str]) -> tuple[bool, str, str]:
    """A canary Ingress's Event, (a warning, reason, message), from what
    :func:`canary_outcome` found: ``Rejected`` when it joins no path."""
    who = _key(canary)
    if not served:
        # No rule with paths: ingress-nginx's canary of a defaultBackend.
        why = reasons or ["it has no paths (a canary of a defaultBackend is not served yet)"]
        return True, "Rejected", f"{who} was rejected: canary not served: " + "; ".join(why)
    joins = f"canary of {', '.join(served)}"
    assert canary.canary is not None
    _, rounded = canary_percent(canary.canary)
    warnings = [*canary.warnings, *reasons, *([rounded] if rounded else [])]
    if warnings:
        message = f"Configuration for {who} was added or updated with warning(s): "
        return True, "AddedOrUpdatedWithWarning", message + "; ".join([joins, *warnings])
    return False, "AddedOrUpdated", f"Configuration for {who} was added or updated ({joins})"
