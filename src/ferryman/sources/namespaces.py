"""One store entry per Namespace when two informers deliver Namespaces.

Readiness gates watch the opted-in Namespaces (label-selected, through
``sources/pods.py``, which keeps an opted-out namespace in the store while its
pods still wait on the gate: it is drained); Gateway API watches every
Namespace (``allowedRoutes`` selects by any label). Both land in the store as
kind ``Namespace``, one object per name, so each informer writing its own
version would undo the other's: the all-namespaces watch would drop a
draining namespace's opt-in at once (stranding its pods), and the gates'
deletion of an opted-out namespace would take it from Gateway API too.

``NamespaceMerge`` sits in front of the sink and keeps both versions. What the
store holds is the latest object from the all-namespaces watch, whose
opt-in label (``INJECT_LABEL``) is the readiness gates' view: set as the gates
see it while they hold the namespace (opted in, or being drained), absent
otherwise. So readiness gates read exactly what they read alone, and Gateway
API every other label as it is now; a namespace leaves the store once neither
holds it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ferryman.resources.meta import ObjectRef
from ferryman.resources.readiness_gate import INJECT_LABEL
from ferryman.sources import Sink

_Obj = Mapping[str, Any]


class _Side:
    """One informer's way in: a Sink."""

    def __init__(self, merge: NamespaceMerge, gated: bool) -> None:
        self._merge = merge
        self._gated = gated

    def upsert(self, obj: _Obj) -> None:
        if obj.get("kind") != "Namespace":  # the Pod informers' pods
            self._merge.sink.upsert(obj)
            return
        name = str((obj.get("metadata") or {}).get("name") or "")
        self._merge.held(self._gated)[name] = obj
        self._merge.emit(name)

    def delete(self, ref: ObjectRef) -> None:
        if ref.kind != "Namespace":
            self._merge.sink.delete(ref)
            return
        self._merge.held(self._gated).pop(ref.name, None)
        self._merge.emit(ref.name)


class NamespaceMerge:
    """``gated``: the readiness gates' sink (Pods pass through);
    ``everything``: the all-namespaces informer's."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self._gated: dict[str, _Obj] = {}
        self._all: dict[str, _Obj] = {}
        self.gated: Sink = _Side(self, gated=True)
        self.everything: Sink = _Side(self, gated=False)

    def held(self, gated: bool) -> dict[str, _Obj]:
        return self._gated if gated else self._all

    def emit(self, name: str) -> None:
        merged = merged_namespace(self._all.get(name), self._gated.get(name))
        if merged is None:
            self.sink.delete(ObjectRef("Namespace", "", name))
        else:
            self.sink.upsert(merged)


def merged_namespace(every: _Obj | None, gated: _Obj | None) -> _Obj | None:
    """``every`` (else ``gated``) with the opt-in label as ``gated`` has it."""
    base = every if every is not None else gated
    if base is None:
        return None
    md = base.get("metadata")
    md = md if isinstance(md, Mapping) else {}
    labels = md.get("labels")
    labels = labels if isinstance(labels, Mapping) else {}
    out = {k: v for k, v in labels.items() if k != INJECT_LABEL}
    gated_labels = (gated.get("metadata") or {}).get("labels") if gated is not None else None
    if isinstance(gated_labels, Mapping) and INJECT_LABEL in gated_labels:
        out[INJECT_LABEL] = gated_labels[INJECT_LABEL]
    return {**base, "metadata": {**md, "labels": out}}
