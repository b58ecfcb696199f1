"""Machine status conditions, as the Machine API writes them.

Condition types, reasons and messages are the Machine API's
(``machine.openshift.io/v1beta1``): ``Drainable`` and ``Terminable`` say whether
hooks would block (or are blocking) drain and termination, ``Drained`` whether
the node was drained. A condition keeps its ``lastTransitionTime`` while its
state (status, reason, severity, message) stays; the list is sorted by type.

Pure: the time is an argument.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ferryman.machines.hooks import Hooks, go_list

DRAINABLE = "Drainable"
TERMINABLE = "Terminable"
DRAINED = "Drained"
HOOK_PRESENT = "HookPresent"
DRAIN_ERROR = "DrainError"
WARNING = "Warning"  # ConditionSeverityWarning: set only with status False

Condition = dict[str, str]


def true(kind: str, message: str = "") -> Condition:
    c = {"type": kind, "status": "True"}
    if message:
        c["message"] = message
    return c


def false(kind: str, reason: str, message: str) -> Condition:
    return {
        "type": kind,
        "status": "False",
        "reason": reason,
        "severity": WARNING,
        "message": message,
    }


def hook_conditions(hooks: Hooks) -> tuple[Condition, Condition]:
    """``Drainable`` and ``Terminable``: False with ``HookPresent`` while hooks exist."""
    drainable = (
        false(
            DRAINABLE,
            HOOK_PRESENT,
            f"Drain operation currently blocked by: {go_list(hooks.pre_drain)}",
        )
        if hooks.pre_drain
        else true(DRAINABLE)
    )
    terminable = (
        false(
            TERMINABLE,
            HOOK_PRESENT,
            f"Terminate operation currently blocked by: {go_list(hooks.pre_terminate)}",
        )
        if hooks.pre_terminate
        else true(TERMINABLE)
    )
    return drainable, terminable


def drain_failed(error: str) -> Condition:
    return false(DRAINED, DRAIN_ERROR, f"could not drain machine: {error}")


def _state(c: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(c.get(k) or "" for k in ("type", "status", "reason", "severity", "message"))


def merged(
    current: Iterable[Mapping[str, Any]], wanted: Iterable[Condition], now: str
) -> list[dict[str, Any]]:
    """``current`` with ``wanted`` set: a condition whose state changes (or is new)
    gets ``now`` as its lastTransitionTime; an unchanged one keeps its own."""
    by_type: dict[str, dict[str, Any]] = {str(c.get("type")): dict(c) for c in current}
    for w in wanted:
        old = by_type.get(w["type"])
        c: dict[str, Any] = dict(w)
        keep = old is not None and _state(old) == _state(w) and old.get("lastTransitionTime")
        c["lastTransitionTime"] = old["lastTransitionTime"] if keep and old else now
        by_type[w["type"]] = c
    return [by_type[k] for k in sorted(by_type)]


def find(conditions: Iterable[Mapping[str, Any]], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in conditions if c.get("type") == kind), None)


def is_true(conditions: Iterable[Mapping[str, Any]], kind: str) -> bool:
    c = find(conditions, kind)
    return c is not None and c.get("status") == "True"
