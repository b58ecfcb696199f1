"""The data plane: the NGINX process, its configuration files, and the push channel.

``DataPlane`` is what the controller needs; ``NginxManager`` drives a real NGINX,
``OutputDirectory`` only writes files (``ferryman render``) and ``FakeDataPlane``
records calls (controller tests).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ferryman.wire.records import RecordKey

# Why NGINX refused to store a record (the push answer's codes, ferryman.lua).
NO_MEMORY = "no_memory"  # the records' shared memory is full
RESERVED = "reserved"  # it would eat into the part kept for endpoint sets
FAST_ZONE_FULL = "fast_zone_full"  # ngx_http_ferryman_module's zone is full
BAD_KEY = "bad_key"  # the module refused the key (longer than it takes)


@dataclass(frozen=True)
class PushResult:
    """What a push achieved: every record it carried is in force except ``refused``
    (record -> one of the codes above), which the data plane no longer holds at
    all. ``memory``: how full each store of records is now (0..1), where known."""

    version: int
    refused: Mapping[RecordKey, str] = field(default_factory=dict)
    memory: Mapping[str, float] = field(default_factory=dict)


class DataPlane(Protocol):
    async def apply(self, files: Mapping[str, str | None]) -> float:
        """Make these files (path relative to the state dir; None: delete) live.

        Returns the seconds the reload took; raises ``ConfigError``.
        """
        ...

    async def push(self, records: Mapping[RecordKey, str], full: bool) -> PushResult:
        """Send records without a reload, in the order given; raises ``PushError``
        when nothing could be applied."""
        ...


def merge_records(into: dict[RecordKey, str], records: Mapping[RecordKey, str], full: bool) -> None:
    """Apply a push to an in-memory copy, as the Lua side does."""
    if full:
        into.clear()
    for key, value in records.items():
        if value:
            into[key] = value
        else:
            into.pop(key, None)
