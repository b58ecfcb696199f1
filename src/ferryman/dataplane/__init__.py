"""The data plane: the NGINX process, its configuration files, and the push channel.

``DataPlane`` is what the controller needs; ``NginxManager`` drives a real NGINX,
``OutputDirectory`` only writes files (``ferryman render``) and ``FakeDataPlane``
records calls (controller tests).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

# A pushed record: (kind, key) -> value; kinds are "E" endpoint set, "H" virtual
# host, "C" certificate (see dataplane/lua/ferryman.lua). "" removes the record.
RecordKey = tuple[str, str]


class DataPlane(Protocol):
    async def apply(self, files: Mapping[str, str | None]) -> float:
        """Make these files (path relative to the state dir; None: delete) live.

        Returns the seconds the reload took; raises ``ConfigError``.
        """
        ...

    async def push(self, records: Mapping[RecordKey, str], full: bool) -> int:
        """Send records without a reload; returns the version now in force."""
        ...


def push_body(version: int, records: Mapping[RecordKey, str], full: bool) -> str:
    lines = [f"{version} full" if full else str(version)]
    lines += [f"{kind}\t{key}\t{value}" for (kind, key), value in records.items()]
    return "\n".join(lines) + "\n"


def merge_records(into: dict[RecordKey, str], records: Mapping[RecordKey, str], full: bool) -> None:
    """Apply a push to an in-memory copy, as the Lua side does."""
    if full:
        into.clear()
    for key, value in records.items():
        if value:
            into[key] = value
        else:
            into.pop(key, None)
