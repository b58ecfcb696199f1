"""The keys the work queue holds, and which keys a stored object's change queues.

Most keys are the ``ObjectRef`` of a resource; the commands name no resource
and ask the worker for something else (flush, recompute a pod's Services, take
the leaving Nodes into account). Each command is a type of its own, so no kind
name can collide with one and the worker dispatches on the type, not a string.
They live apart from the controller because the sources' sink (``sink.py``,
above the controller) maps events to them too, and that mapping is pure:
objects in, keys out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ferryman.resources.meta import ObjectRef
from ferryman.resources.pod import addresses_to_resync
from ferryman.resources.service import service_name_of


@dataclass(frozen=True, slots=True)
class Resync:
    """Syncs nothing: it wakes the worker so that it flushes."""

    def __str__(self) -> str:
        return "resync"


@dataclass(frozen=True, slots=True)
class PodAddress:
    """A pod's address changed readiness (readiness gates): the Services whose
    endpoint sets hold it are recomputed."""

    namespace: str
    address: str

    def __str__(self) -> str:
        return f"pod address {self.namespace}/{self.address}"


@dataclass(frozen=True, slots=True)
class LeavingNodes:
    """The Nodes being drained (machine lifecycle hooks) changed: endpoint sets
    are recomputed without them."""

    def __str__(self) -> str:
        return "leaving nodes"


RESYNC = Resync()
LEAVING_NODES = LeavingNodes()

# What the work queue holds: a resource, or a command to the worker.
QueueKey = ObjectRef | Resync | PodAddress | LeavingNodes


def keys_for_event(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[QueueKey]:
    """Map a stored object (and its previous version) to the keys to sync."""
    kind = str(obj.get("kind"))
    md = obj.get("metadata") or {}
    ns, name = str(md.get("namespace") or ""), str(md.get("name") or "")
    if kind == "EndpointSlice":
        keys: list[QueueKey] = []
        for o in (obj, old):
            if o is not None and (svc := service_name_of(o)):
                keys.append(ObjectRef("Service", ns, svc))
        return keys
    if kind == "Pod":
        return [PodAddress(ns, ip) for ip in addresses_to_resync(obj, old)]
    return [ObjectRef(kind, ns, name)]
