"""A flush's record changes (dataplane/records.py with translators/tracked_records.py):
only the keys touched since the last flush, and what it left unsent, are compared."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from pathlib import Path

from ferryman.dataplane.fake import FakeDataPlane
from ferryman.dataplane.records import AppliedRecords
from ferryman.engine.settings import Settings
from ferryman.observability.metrics import Metrics
from ferryman.translators.tracked_records import TrackedRecords
from ferryman.wire.records import RecordKey

N = 2000


class Counted(Mapping[RecordKey, str]):
    """The desired records, counting each record looked at."""

    def __init__(self, records: Mapping[RecordKey, str]) -> None:
        self._records = records
        self.looked_at = 0

    def __getitem__(self, key: RecordKey) -> str:
        self.looked_at += 1
        return self._records[key]

    def __iter__(self) -> Iterator[RecordKey]:
        for key in self._records:
            self.looked_at += 1
            yield key

    def __len__(self) -> int:
        return len(self._records)


def flushed(tmp_path: Path) -> tuple[TrackedRecords, AppliedRecords, FakeDataPlane]:
    records = TrackedRecords()
    for i in range(N):
        records[("H", f"h{i}")] = f"v{i}"
    dataplane = FakeDataPlane()
    applied = AppliedRecords(dataplane, Settings(state_dir=tmp_path), Metrics())
    changes = applied.changes(records.view(), records.take_touched())
    assert len(changes) == N  # the first flush: everything
    asyncio.run(applied.push(changes))
    return records, applied, dataplane


def test_a_flush_looks_at_what_changed_not_every_record(tmp_path: Path) -> None:
    records, applied, dataplane = flushed(tmp_path)
    records[("H", "h1")] = "new"
    del records[("H", "h2")]
    records[("H", "h3")] = "v3"  # written again, unchanged
    records[("E", "e")] = "peers"
    desired = Counted(records.view())
    changes = applied.changes(desired, records.take_touched())
    assert changes == {("H", "h1"): "new", ("H", "h2"): "", ("E", "e"): "peers"}
    assert desired.looked_at <= 10
    asyncio.run(applied.push(changes))
    assert dataplane.records == dict(records.view())
    assert applied.changes(records.view(), records.take_touched()) == {}


def test_what_a_flush_left_unsent_is_compared_again(tmp_path: Path) -> None:
    records, applied, _ = flushed(tmp_path)
    records[("H", "h1")] = "new"
    changes = applied.changes(records.view(), records.take_touched())
    assert changes == {("H", "h1"): "new"}
    # Not pushed (NGINX did not answer): nothing touched since, still a change.
    assert applied.changes(records.view(), records.take_touched()) == {("H", "h1"): "new"}
    # NGINX lost its memory: everything again.
    applied.forget_all()
    assert len(applied.changes(records.view(), records.take_touched())) == N


def test_every_way_of_writing_is_seen() -> None:
    records = TrackedRecords()
    records.update({("H", "a"): "1", ("H", "b"): "2"})
    records.setdefault(("H", "c"), "3")
    assert records.take_touched() == {("H", "a"), ("H", "b"), ("H", "c")}
    records.pop(("H", "a"))
    records.pop(("H", "x"), None)
    records.clear()
    assert records.take_touched() == {("H", "a"), ("H", "b"), ("H", "c")}
    assert records.take_touched() == set()
