"""The cache every sync reads from: raw objects by kind, plus the indexes
sync needs (EndpointSlices by Service). Only sources write to it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ferryman.resources.meta import ObjectRef, ref_of
from ferryman.resources.service import service_name_of

RawObject = Mapping[str, Any]


class Store:
    def __init__(self) -> None:
        self._objects: dict[str, dict[tuple[str, str], RawObject]] = {}
        self._slices: dict[tuple[str, str], set[str]] = {}

    def upsert(self, obj: RawObject) -> RawObject | None:
        ref = ref_of(obj)
        if ref is None:
            raise ValueError("object without kind or metadata.name")
        old = self._objects.setdefault(ref.kind, {}).get((ref.namespace, ref.name))
        self._objects[ref.kind][(ref.namespace, ref.name)] = obj
        if ref.kind == "EndpointSlice":
            if old is not None:
                self._unindex_slice(ref, old)
            self._slices.setdefault((ref.namespace, service_name_of(obj)), set()).add(ref.name)
        return old

    def delete(self, ref: ObjectRef) -> RawObject | None:
        old = self._objects.get(ref.kind, {}).pop((ref.namespace, ref.name), None)
        if old is not None and ref.kind == "EndpointSlice":
            self._unindex_slice(ref, old)
        return old

    def _unindex_slice(self, ref: ObjectRef, obj: RawObject) -> None:
        key = (ref.namespace, service_name_of(obj))
        names = self._slices.get(key)
        if names is not None:
            names.discard(ref.name)
            if not names:
                del self._slices[key]

    def get(self, kind: str, namespace: str, name: str) -> RawObject | None:
        return self._objects.get(kind, {}).get((namespace, name))

    def objects(self, kind: str) -> list[RawObject]:
        return list(self._objects.get(kind, {}).values())

    def refs(self, kind: str) -> list[ObjectRef]:
        return [ObjectRef(kind, ns, n) for ns, n in self._objects.get(kind, {})]

    def uid(self, ref: ObjectRef) -> str | None:
        obj = self.get(ref.kind, ref.namespace, ref.name)
        md = obj.get("metadata") if obj else None
        return str(md["uid"]) if isinstance(md, Mapping) and md.get("uid") else None

    def count(self, kind: str) -> int:
        return len(self._objects.get(kind, {}))

    def slices_for(self, namespace: str, service: str) -> list[RawObject]:
        slices = self._objects.get("EndpointSlice", {})
        return [
            slices[(namespace, n)]
            for n in sorted(self._slices.get((namespace, service), ()))
            if (namespace, n) in slices
        ]
