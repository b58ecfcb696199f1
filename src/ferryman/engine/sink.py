"""What sources deliver to: the store first, then the keys to sync into the queue."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ferryman.engine.queue_keys import QueueKey, keys_for_event
from ferryman.engine.store import Store
from ferryman.engine.workqueue import WorkQueue
from ferryman.resources.meta import ObjectRef
from ferryman.resources.raw import Packed

if TYPE_CHECKING:
    from ferryman.gates.pods import PendingIndex


class QueueingSink:
    """Source events -> store, then the keys they affect -> queue; and to ``also``
    (readiness gates: the index of pending pods), after the store."""

    def __init__(
        self, store: Store, queue: WorkQueue[QueueKey], also: PendingIndex | None = None
    ) -> None:
        self._store = store
        self._queue = queue
        self._also = also

    def upsert(self, obj: Mapping[str, Any]) -> None:
        old, changed = self._store.put(obj)
        # A packed object (manifests mode) unpacks whole per field read.
        view = obj.unpack() if isinstance(obj, Packed) else obj
        # Nothing a parser reads changed (ferryman's own status write came
        # back): no sync (Store.put says which kinds sync anyway).
        if changed:
            for key in keys_for_event(view, old):
                self._queue.add(key)
        if self._also is not None:
            self._also.upsert(obj)

    def delete(self, ref: ObjectRef) -> None:
        old = self._store.delete(ref)
        if old is not None:
            for key in keys_for_event(old, None):
                self._queue.add(key)
        if self._also is not None:
            self._also.delete(ref)
