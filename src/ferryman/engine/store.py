"""The cache every sync reads from: raw objects by kind, plus the indexes
sync needs (EndpointSlices by Service, Pods by address). Only sources write to it.

Objects are kept slim and packed (``resources/raw.py``): only the fields the
parsers read, as one string each. Every read unpacks a fresh copy, which its
reader may keep or drop; nothing read from the store aliases what it holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ferryman.engine.kind_spec import CORE, KindSpec, by_kind
from ferryman.resources.meta import ObjectRef, ref_of
from ferryman.resources.pod import ips_of
from ferryman.resources.raw import Packed, pack
from ferryman.resources.service import service_name_of

RawObject = Mapping[str, Any]


class Store:
    def __init__(self, kinds: Iterable[KindSpec] = ()) -> None:
        """``kinds``: the registered kinds, whose objects keep only what their
        spec says their parsers read (any other object is kept whole)."""
        self._specs = by_kind(kinds)
        self._syncs_unchanged = {
            s.kind for s in (*CORE, *self._specs.values()) if s.syncs_unchanged
        }
        self._objects: dict[str, dict[tuple[str, str], Packed]] = {}
        # (namespace, Service) -> its EndpointSlices' names; and each slice's Service.
        self._slices: dict[tuple[str, str], set[str]] = {}
        self._slice_service: dict[tuple[str, str], str] = {}
        # (namespace, address) -> the names of the pods holding it (several: pods
        # on the host network share their node's address). A tuple, not a set:
        # almost always one name, and a set costs 216 bytes per watched pod.
        self._pods_at: dict[tuple[str, str], tuple[str, ...]] = {}
        # Counts every upsert and delete: a reader that derived something from
        # the store may keep it while this stays the same.
        self.changes = 0

    def upsert(self, obj: RawObject) -> RawObject | None:
        """Keep ``obj`` (slimmed: ``raw.slim``); returns the version it replaces."""
        return self.put(obj)[0]

    def put(self, obj: RawObject) -> tuple[RawObject | None, bool]:
        """``upsert``, and whether what the parsers read changed: False when the
        kept object differs from the one it replaces only in resourceVersion and
        its kind's ``reported`` fields (ferryman's own status write, seen again
        through the watch), which then counts as no change of the store; always
        True for a kind whose every update syncs (``KindSpec.syncs_unchanged``)."""
        # A packed object unpacks whole per field read: read one copy.
        view = obj.unpack() if isinstance(obj, Packed) else obj
        ref = ref_of(view)
        if ref is None:
            raise ValueError("object without kind or metadata.name")
        key = (ref.namespace, ref.name)
        packed = pack(obj, kinds=self._specs)
        old_packed = self._objects.setdefault(ref.kind, {}).get(key)
        self._objects[ref.kind][key] = packed
        old = None if old_packed is None else old_packed.unpack()
        if old is not None and self._same_but_written(ref.kind, old, packed.unpack()):
            return old, False
        self.changes += 1
        if ref.kind == "EndpointSlice":
            self._unindex_slice(ref)
            service = service_name_of(view)
            self._slice_service[key] = service
            self._slices.setdefault((ref.namespace, service), set()).add(ref.name)
        elif ref.kind == "Pod":
            if old is not None:
                self._unindex_pod(ref, old)
            for ip in ips_of(view):
                at = (ref.namespace, ip)
                self._pods_at[at] = (*self._pods_at.get(at, ()), ref.name)
        return old, True

    def _same_but_written(self, kind: str, old: RawObject, new: RawObject) -> bool:
        if kind in self._syncs_unchanged:
            return False
        spec = self._specs.get(kind)
        reported = spec.reported if spec is not None else ()
        return _without(old, reported) == _without(new, reported)

    def delete(self, ref: ObjectRef) -> RawObject | None:
        packed = self._objects.get(ref.kind, {}).pop((ref.namespace, ref.name), None)
        if packed is None:
            return None
        self.changes += 1
        old = packed.unpack()
        if ref.kind == "EndpointSlice":
            self._unindex_slice(ref)
        elif ref.kind == "Pod":
            self._unindex_pod(ref, old)
        return old

    def _unindex_pod(self, ref: ObjectRef, old: RawObject) -> None:
        for ip in ips_of(old):
            at = (ref.namespace, ip)
            names = tuple(n for n in self._pods_at.get(at, ()) if n != ref.name)
            if names:
                self._pods_at[at] = names
            else:
                self._pods_at.pop(at, None)

    def _unindex_slice(self, ref: ObjectRef) -> None:
        service = self._slice_service.pop((ref.namespace, ref.name), None)
        if service is None:
            return
        key = (ref.namespace, service)
        names = self._slices.get(key)
        if names is not None:
            names.discard(ref.name)
            if not names:
                del self._slices[key]

    def get(self, kind: str, namespace: str, name: str) -> RawObject | None:
        obj = self._objects.get(kind, {}).get((namespace, name))
        return None if obj is None else obj.unpack()

    def stamp(self, kind: str, namespace: str, name: str) -> object | None:
        """An opaque value, the same object until the object is replaced or deleted
        (None: absent): a reader that keeps what it parsed from ``get`` re-reads
        only when the stamp changes, without unpacking (the readiness gate webhook
        answers from every served Service of a namespace, per pod)."""
        return self._objects.get(kind, {}).get((namespace, name))

    def objects(self, kind: str) -> list[RawObject]:
        return [o.unpack() for o in self._objects.get(kind, {}).values()]

    def refs(self, kind: str) -> list[ObjectRef]:
        return [ObjectRef(kind, ns, n) for ns, n in self._objects.get(kind, {})]

    def uid(self, ref: ObjectRef) -> str | None:
        obj = self.get(ref.kind, ref.namespace, ref.name)
        md = obj.get("metadata") if obj else None
        return str(md["uid"]) if isinstance(md, Mapping) and md.get("uid") else None

    def count(self, kind: str) -> int:
        return len(self._objects.get(kind, {}))

    def total(self) -> int:
        """Every object held, of every kind."""
        return sum(len(objects) for objects in self._objects.values())

    def slices_for(self, namespace: str, service: str) -> list[RawObject]:
        slices = self._objects.get("EndpointSlice", {})
        return [
            slices[(namespace, n)].unpack()
            for n in sorted(self._slices.get((namespace, service), ()))
            if (namespace, n) in slices
        ]

    def pods_at(self, namespace: str, address: str) -> list[RawObject]:
        """The pods of ``namespace`` whose status holds ``address``."""
        pods = self._objects.get("Pod", {})
        return [
            pods[(namespace, n)].unpack()
            for n in sorted(self._pods_at.get((namespace, address), ()))
        ]


def _without(obj: RawObject, fields: tuple[str, ...]) -> dict[str, Any]:
    """``obj`` without the top-level ``fields`` and metadata's resourceVersion."""
    out = {k: v for k, v in obj.items() if k not in fields}
    md = out.get("metadata")
    if isinstance(md, Mapping):
        out["metadata"] = {k: v for k, v in md.items() if k != "resourceVersion"}
    return out
