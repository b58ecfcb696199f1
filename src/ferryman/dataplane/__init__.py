"""The data plane: the NGINX process, its configuration files, and the push channel.

``DataPlane`` is what the controller needs; ``NginxManager`` drives a real NGINX,
``OutputDirectory`` only writes files (``ferryman render``) and ``FakeDataPlane``
records calls (controller tests).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

# A pushed record: (kind, key) -> value; kinds are "E" endpoint set, "H" virtual
# host, "C" certificate, "V" a VirtualServer host's routing, "M" a host's client
# certificate check, "S" a TransportServer and "T" its certificate
# (ngx_stream_ferryman_module) (see
# dataplane/lua/ferryman.lua). "" removes the record.
RecordKey = tuple[str, str]

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


# A record is one line, fields split by tabs: no key or value may hold a line
# break, a tab or any other control character. The certificate value is the one
# with a tab of its own: base64 chain, tab, base64 key.
_KEY_RE = re.compile(r"[^\x00-\x20\x7f]+")
_VALUE_RE = re.compile(r"[^\x00-\x1f\x7f]*")
_CERTIFICATE_RE = re.compile(r"[A-Za-z0-9+/=]+\t[A-Za-z0-9+/=]+")


KINDS = ("E", "H", "C", "V", "M", "F", "S", "T", "W")


def record_problem(key: RecordKey, value: str) -> str | None:
    """Why a record cannot travel in a push (None: it can). Every string in a record
    passed ``resources/validation.py``; this is the encoder's own last check."""
    kind, name = key
    if kind not in KINDS:
        return f"unknown record kind {kind!r}"
    if not _KEY_RE.fullmatch(name):
        return f"its key {name[:80]!r} holds a space or control character"
    pattern = _CERTIFICATE_RE if kind == "C" and value else _VALUE_RE
    if not pattern.fullmatch(value):
        return "its value holds a line break, tab or other control character"
    return None


def push_body(version: int, records: Mapping[RecordKey, str], full: bool) -> str:
    """The push request body (grammar in dataplane/lua/ferryman.lua); raises
    ValueError for a record that ``record_problem`` refuses."""
    lines = [f"{version} full" if full else str(version)]
    for (kind, key), value in records.items():
        if problem := record_problem((kind, key), value):
            raise ValueError(f"record {kind} {key[:80]!r} cannot be pushed: {problem}")
        lines.append(f"{kind}\t{key}\t{value}")
    return "\n".join(lines) + "\n"


# A VirtualServer's routing before its host's stub: once the stub is in force,
# the slow path finds the routing it hands requests to; likewise the host's
# client certificate check and the module's routes of it.
_ORDER = {"E": 1, "C": 2, "T": 2, "M": 3, "V": 3, "F": 3, "S": 3, "H": 4}


def push_order(records: Mapping[RecordKey, str]) -> dict[RecordKey, str]:
    """Removals first (they free memory), then endpoint sets (traffic to pods that
    are gone must stop even when memory is short), certificates, VirtualServer
    routing, virtual hosts."""
    return dict(sorted(records.items(), key=lambda kv: (bool(kv[1]), _ORDER.get(kv[0][0], 4))))


def merge_records(into: dict[RecordKey, str], records: Mapping[RecordKey, str], full: bool) -> None:
    """Apply a push to an in-memory copy, as the Lua side does."""
    if full:
        into.clear()
    for key, value in records.items():
        if value:
            into[key] = value
        else:
            into.pop(key, None)
