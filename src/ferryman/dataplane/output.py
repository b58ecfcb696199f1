"""A data plane that only writes files: ``ferryman render``.

The configuration goes under ``root``; the records NGINX would be sent go to
``records.txt`` in the push format (0600: it holds private keys).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ferryman.dataplane import PushResult, merge_records
from ferryman.dataplane.files import atomic_write
from ferryman.wire.push import push_body
from ferryman.wire.records import RecordKey


class OutputDirectory:
    def __init__(self, root: Path) -> None:
        self._root = root
        self.records: dict[RecordKey, str] = {}

    async def apply(self, files: Mapping[str, str | None]) -> float:
        for rel, text in files.items():
            path = self._root / rel
            if text is None:
                path.unlink(missing_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(path, text)
        return 0.0

    async def push(self, records: Mapping[RecordKey, str], full: bool) -> PushResult:
        merge_records(self.records, records, full)
        atomic_write(
            self._root / "records.txt", push_body(0, dict(sorted(self.records.items())), True),
            mode=0o600,
        )  # fmt: skip
        return PushResult(0)
