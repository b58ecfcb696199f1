"""The push body: what carries records into the data plane (grammar in
``dataplane/lua/ferryman.lua``), the encoder's last check of each record, and
the order records travel in."""

from __future__ import annotations

import re
from collections.abc import Mapping

from ferryman.wire.records import Record, RecordKey

# A record is one line, fields split by tabs: no key or value may hold a line
# break, a tab or any other control character. The certificate value is the one
# with a tab of its own: base64 chain, tab, base64 key.
_KEY_RE = re.compile(r"[^\x00-\x20\x7f]+")
_VALUE_RE = re.compile(r"[^\x00-\x1f\x7f]*")
_CERTIFICATE_RE = re.compile(r"[A-Za-z0-9+/=]+\t[A-Za-z0-9+/=]+")


KINDS = frozenset(Record)


def record_problem(key: RecordKey, value: str) -> str | None:
    """Why a record cannot travel in a push (None: it can). Every string in a record
    passed ``resources/validation.py``; this is the encoder's own last check."""
    kind, name = key
    if kind not in KINDS:
        return f"unknown record kind {kind!r}"
    if not _KEY_RE.fullmatch(name):
        return f"its key {name[:80]!r} holds a space or control character"
    pattern = _CERTIFICATE_RE if kind == Record.CERTIFICATE and value else _VALUE_RE
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
_ORDER: dict[str, int] = {
    Record.ENDPOINTS: 1,
    Record.CERTIFICATE: 2,
    Record.STREAM_CERTIFICATE: 2,
    Record.CLIENT_CHECK: 3,
    Record.GATEWAY_CLIENT: 3,
    Record.ROUTING: 3,
    Record.FAST_ROUTES: 3,
    Record.STREAM: 3,
    Record.HOST: 4,
}


def push_order(records: Mapping[RecordKey, str]) -> dict[RecordKey, str]:
    """Removals first (they free memory), then endpoint sets (traffic to pods that
    are gone must stop even when memory is short), certificates, VirtualServer
    routing, virtual hosts."""
    return dict(sorted(records.items(), key=lambda kv: (bool(kv[1]), _ORDER.get(kv[0][0], 4))))
