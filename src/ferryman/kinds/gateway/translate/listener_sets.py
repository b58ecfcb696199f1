"""The translator's ListenerSet statuses (records/listener_sets.py decides
them): each placed ListenerSet's own, and its Gateway's trimmed to the
Gateway's own listeners with ``attachedListenerSets``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, MutableMapping
from dataclasses import replace
from typing import Any

from ferryman.kinds.gateway.parse.listener_set import ListenerSet
from ferryman.kinds.gateway.records.listener_sets import Merged, SetStatus
from ferryman.kinds.gateway.records.listeners import Condition
from ferryman.kinds.gateway.records.status import listener_set_status, with_listener_sets
from ferryman.resources.meta import ObjectRef


def publish(
    merged: Merged,
    sets: Mapping[tuple[str, str], SetStatus],
    attached: Mapping[tuple[str, str], int],
    statuses: MutableMapping[ObjectRef, Mapping[str, Any]],
) -> None:
    for p in merged.placed:
        meta = p.listener_set.meta
        ref = ObjectRef("ListenerSet", meta.namespace, meta.name)
        status = sets[(meta.namespace, meta.name)]
        why = _not_programmed(statuses.get(ObjectRef("Gateway", *p.gateway)))
        if status.programmed.status and why is not None:
            # Its listeners are served where the Gateway is: nowhere yet.
            message = f"its Gateway is not programmed: {why}"
            status = replace(status, programmed=Condition("Programmed", False, "Pending", message))
        statuses[ref] = listener_set_status(status, meta.generation)
    for g in merged.gateways:
        key = (g.meta.namespace, g.meta.name)
        ref = ObjectRef("Gateway", *key)
        if (body := statuses.get(ref)) is not None:
            # attachedListenerSets only where ListenerSets may attach: every
            # other Gateway's status stays as it was.
            count = attached.get(key, 0) if g.listener_sets_from != "None" else None
            statuses[ref] = with_listener_sets(dict(body), count)


def parsed(
    parses: Iterable[tuple[ObjectRef, Any]], reject: Callable[[ObjectRef, str], None]
) -> list[ListenerSet]:
    """The ListenerSets that parsed (``GatewayTranslator._parse_all``'s); the
    others rejected (an Event), as the translator's other kinds are."""
    out = []
    for ref, p in parses:
        if p.parsed.resource is None:
            reject(ref, p.parsed.message())
        else:
            out.append(p.parsed.resource)
    return out


def _not_programmed(body: Mapping[str, Any] | None) -> str | None:
    """Why a Gateway's status says it is not Programmed (None: it is, or no status)."""
    for c in (body or {}).get("conditions") or ():
        if c.get("type") == "Programmed" and c.get("status") == "False":
            return str(c.get("message") or c.get("reason") or "")
    return None
