"""The records NGINX holds, and pushing changes to them one round at a time.

A record can fail on its own: too large for ``--max-record-bytes``, not
encodable as one line, or refused by NGINX because its memory is full. Such a
record is not held afterwards (NGINX removes what it refuses), and ``push``
returns it with a reason naming the limit, for the controller to reject the
resource behind it. Everything else in the round is in force.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Mapping

from ferryman.dataplane import BAD_KEY, FAST_ZONE_FULL, NO_MEMORY, RESERVED, DataPlane, PushResult
from ferryman.dataplane.errors import PushError
from ferryman.engine.settings import Settings
from ferryman.observability.metrics import Metrics
from ferryman.wire.push import push_order, record_problem
from ferryman.wire.records import RecordKey

log = logging.getLogger("ferryman.records")

# Above this fill ratio of NGINX's record memory ferryman logs a warning: from
# 0.9 on, only records up to 4 KiB and endpoint sets may still grow, from 0.98
# only endpoint sets (ferryman.lua's LARGE_RECORD and reserves).
MEMORY_WARNING_RATIO = 0.8
LARGE_RECORD = 4096


def memory_refusal(why: str) -> bool:
    """``why`` (a reason ``push`` gave) says NGINX's memory had no room."""
    return why.startswith("does not fit in")


class AppliedRecords:
    def __init__(self, dataplane: DataPlane, settings: Settings, metrics: Metrics) -> None:
        self._dataplane = dataplane
        self._settings = settings
        self._metrics = metrics
        self._applied: dict[RecordKey, str] = {}
        self.full = False  # the next push replaces everything NGINX holds
        # Keys that may differ from the desired records besides those touched
        # since: all of them (None) at first and once NGINX lost its memory, else
        # the last ``changes`` not pushed since (unsent, refused, a failed push).
        self._unsettled: set[RecordKey] | None = None
        self._memory: dict[str, float] = {}  # store -> last fill ratio NGINX told
        # Since when (monotonic) pushes fail: NGINX runs what it had (engine/following.py).
        self.failing_since: float | None = None

    def forget_all(self) -> None:
        """NGINX lost its memory (it was restarted): the next push sends everything."""
        self._applied.clear()
        self._unsettled = None
        self.full = True

    def held(self, key: RecordKey) -> str | None:
        """The value NGINX confirmed holding for ``key`` (None: none)."""
        return self._applied.get(key)

    def changes(
        self, desired: Mapping[RecordKey, str], touched: Collection[RecordKey] | None = None
    ) -> dict[RecordKey, str]:
        """Records that differ from what NGINX holds ("" deletes one). ``touched``:
        the keys of ``desired`` set or removed since the last call (None: any
        may have been); only those and the last call's changes are compared, so
        a flush costs what changed, not every record."""
        if touched is None or self._unsettled is None:
            changes = {k: v for k, v in desired.items() if self._applied.get(k) != v}
            changes.update({k: "" for k in self._applied if k not in desired})
        else:
            changes = {}
            for k in self._unsettled.union(touched):
                v = desired.get(k)
                if v is not None:
                    if self._applied.get(k) != v:
                        changes[k] = v
                elif k in self._applied:
                    changes[k] = ""
        self._unsettled = set(changes) if touched is not None else None
        return changes

    async def push(self, changes: Mapping[RecordKey, str]) -> dict[RecordKey, str]:
        """Push one round: returns the records not in force, with why (empty: all
        are). Raises ``PushError`` when nothing could be applied."""
        refused = self._screen(changes)
        sendable = push_order({k: v for k, v in changes.items() if k not in refused})
        if not sendable and not self.full:
            return refused
        try:
            result = await self._dataplane.push(sendable, full=self.full)
        except PushError:
            self.failing_since = self.failing_since or time.monotonic()
            raise
        self.failing_since = None
        self.full = False
        self._record(sendable, result)
        if self._unsettled is not None:  # held as sent now: the next changes skip them
            self._unsettled.difference_update(k for k in sendable if k not in result.refused)
        for key, code in result.refused.items():
            refused[key] = self._refusal(code, len(sendable.get(key, "")))
            self._metrics.records_refused.labels(reason=code).inc()
        return refused

    def _screen(self, changes: Mapping[RecordKey, str]) -> dict[RecordKey, str]:
        """Records that must not be sent at all, with why: too large, or not one line."""
        limit = self._settings.nginx.max_record_bytes
        refused: dict[RecordKey, str] = {}
        for key, value in changes.items():
            if not value:
                continue
            if problem := record_problem(key, value):
                refused[key] = f"cannot be pushed to NGINX: {problem}"
                self._metrics.records_refused.labels(reason="unencodable").inc()
            elif (size := len(value.encode())) > limit:
                refused[key] = f"is {size} bytes, more than --max-record-bytes {limit}"
                self._metrics.records_refused.labels(reason="too_large").inc()
        return refused

    def _record(self, sent: Mapping[RecordKey, str], result: PushResult) -> None:
        for key, value in sent.items():
            if value and key not in result.refused:
                self._applied[key] = value
            else:  # removed, or refused (NGINX then holds no value for it either)
                self._applied.pop(key, None)
        for store, ratio in result.memory.items():
            self._metrics.records_memory.labels(store=store).set(ratio)
            before = self._memory.get(store, 0.0)
            self._memory[store] = ratio
            fields = {"store": store, "ratio": round(ratio, 3), "limit": MEMORY_WARNING_RATIO}
            if ratio >= MEMORY_WARNING_RATIO > before:
                log.warning(
                    "NGINX's record memory is filling up: raise --records-memory-size",
                    extra={"fields": {**fields, "size": self._settings.nginx.shared_dict_size}},
                )
            elif before >= MEMORY_WARNING_RATIO > ratio:
                log.info(
                    "NGINX's record memory is below the warning ratio again",
                    extra={"fields": fields},
                )

    def _refusal(self, code: str, size: int) -> str:
        """A refusal's reason, naming the limit that was hit."""
        memory = f"--records-memory-size {self._settings.nginx.shared_dict_size}"
        full = f"{self._memory.get('dict', 1.0):.0%} full"
        if code == NO_MEMORY:
            return f"does not fit in NGINX's record memory ({memory}, {full})"
        if code == RESERVED:
            kept = (
                "its last 10% is kept for records up to 4 KiB and endpoint sets"
                if size > LARGE_RECORD
                else "its last 2% is kept for endpoint sets"
            )
            return f"does not fit in NGINX's record memory ({memory}, {full}): {kept}"
        if code == FAST_ZONE_FULL:
            return f"does not fit in the fast path module's zone (sized from {memory})"
        if code == BAD_KEY:
            return "has a key longer than the fast path module takes"
        return f"was refused by NGINX ({code})"
