"""The desired records, knowing which keys changed since the last flush asked.

A flush sends NGINX the records that differ from what it holds. Comparing
every record for that made each flush cost the size of the configuration: at
100,000 Ingresses (~300,000 records) ~0.5 s per flush, which every new Ingress,
Service and EndpointSlice waited for. With the keys written or removed since
(``take_touched``), a flush compares only those (dataplane/records.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from types import MappingProxyType

from ferryman.wire.records import RecordKey


class TrackedRecords(MutableMapping[RecordKey, str]):
    """A dict of records that remembers each key set or removed (whatever the
    method: ``pop``, ``update`` and the rest go through the two below)."""

    __slots__ = ("_records", "_touched")

    def __init__(self) -> None:
        self._records: dict[RecordKey, str] = {}
        self._touched: set[RecordKey] = set()

    def __getitem__(self, key: RecordKey) -> str:
        return self._records[key]

    def __contains__(self, key: object) -> bool:
        return key in self._records

    def __setitem__(self, key: RecordKey, value: str) -> None:
        self._touched.add(key)
        self._records[key] = value

    def __delitem__(self, key: RecordKey) -> None:
        del self._records[key]
        self._touched.add(key)

    def __iter__(self) -> Iterator[RecordKey]:
        return iter(self._records)

    def __len__(self) -> int:
        return len(self._records)

    def view(self) -> Mapping[RecordKey, str]:
        """Every record, read-only, at a dict's speed."""
        return MappingProxyType(self._records)

    def take_touched(self) -> set[RecordKey]:
        """The keys set or removed since the last call."""
        touched, self._touched = self._touched, set()
        return touched
