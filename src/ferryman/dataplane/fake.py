"""An in-memory ``DataPlane`` for controller tests: records what it was asked to
apply and push, and can refuse configurations the way ``nginx -t`` would and,
with a ``capacity``, records the way a full shared memory does."""

from __future__ import annotations

from collections.abc import Mapping

from ferryman.dataplane import NO_MEMORY, PushResult, merge_records
from ferryman.dataplane.errors import ConfigTestError, PushError
from ferryman.dataplane.in_flight import InFlight
from ferryman.dataplane.reloads import OTHER, ReloadObserver
from ferryman.wire.records import RecordKey


class FakeDataPlane:
    def __init__(
        self,
        refuse: frozenset[str] = frozenset(),
        capacity: int | None = None,
        reloads: ReloadObserver | None = None,
    ) -> None:
        """``capacity``: bytes of record values held at most (None: no bound);
        records that would go beyond it are refused one by one, as NGINX does."""
        self.refuse = refuse
        self.capacity = capacity
        self.observer = reloads  # told of each reload, as NginxManager tells it
        self.files: dict[str, str] = {}
        self.records: dict[RecordKey, str] = {}
        self.reloads = 0
        self.pushes = 0
        self.pushed: list[dict[RecordKey, str]] = []  # every push's records, in order
        self.fail_pushes = False  # the push socket does not answer
        self.in_flight_reading = InFlight()  # what in_flight() answers: set it in a test

    async def apply(self, files: Mapping[str, str | None]) -> float:
        bad = tuple(p for p, text in files.items() if text is not None and text in self.refuse)
        if bad:
            error = ConfigTestError(f"[emerg] refused in /state/{bad[0]}:1", culprits=bad)
            if self.observer is not None:
                self.observer.reload_failed(OTHER, str(error))
            raise error
        for path, text in files.items():
            if text is None:
                self.files.pop(path, None)
            else:
                self.files[path] = text
        self.reloads += 1
        if self.observer is not None:
            self.observer.reloaded(OTHER, 0.001)
        return 0.001

    async def push(self, records: Mapping[RecordKey, str], full: bool) -> PushResult:
        if self.fail_pushes:
            raise PushError("push socket: connection refused")
        self.pushed.append(dict(records))
        if full:
            self.records.clear()
        refused: dict[RecordKey, str] = {}
        for key, value in records.items():
            merge_records(self.records, {key: value}, full=False)
            if self.capacity is not None and self.used() > self.capacity:
                del self.records[key]
                refused[key] = NO_MEMORY
        self.pushes += 1
        memory = {"dict": self.used() / self.capacity} if self.capacity else {}
        return PushResult(self.pushes, refused, memory)

    async def in_flight(self) -> InFlight:
        return self.in_flight_reading

    def used(self) -> int:
        return sum(len(v) for v in self.records.values())
