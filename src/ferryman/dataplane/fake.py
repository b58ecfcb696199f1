"""An in-memory ``DataPlane`` for controller tests: records what it was asked to
apply and push, and can refuse configurations the way ``nginx -t`` would."""

from __future__ import annotations

from collections.abc import Mapping

from ferryman.dataplane import RecordKey, merge_records
from ferryman.dataplane.errors import ConfigTestError
from ferryman.dataplane.reloads import OTHER, ReloadObserver


class FakeDataPlane:
    def __init__(
        self, refuse: frozenset[str] = frozenset(), reloads: ReloadObserver | None = None
    ) -> None:
        self.refuse = refuse
        self.observer = reloads  # told of each reload, as NginxManager tells it
        self.files: dict[str, str] = {}
        self.records: dict[RecordKey, str] = {}
        self.reloads = 0
        self.pushes = 0

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

    async def push(self, records: Mapping[RecordKey, str], full: bool) -> int:
        merge_records(self.records, records, full)
        self.pushes += 1
        return self.pushes
