"""The wire protocol's golden vectors (tests/golden/wire/push.json), Python side:
ferryman's encoders (every kind's, through ferryman render, and push_body) still
produce exactly the committed bytes, and a decoder that follows the grammar in
dataplane/lua/ferryman.lua's header gives back the committed records. The Lua
and C sides decode the same bytes in tests/integration/test_wire_golden_nginx.py.

Set FERRYMAN_UPDATE_GOLDEN=1 to rewrite the vectors from the current encoders;
review the diff before keeping it."""

from __future__ import annotations

import os
import re

import pytest

from ferryman.wire.push import KINDS, record_problem
from ferryman.wire.records import Record
from testkit.wire_vectors import (
    GOLDEN,
    PUSHES,
    VECTORS,
    Push,
    body_bytes,
    generate,
    load,
    to_json,
    write,
)

UPDATE = os.environ.get("FERRYMAN_UPDATE_GOLDEN") == "1"

# The grammar as ferryman_records.lua reads it: a header, then records.
HEADER = re.compile(r"(\d+)( full)?")
LINE = re.compile(r"([EHCVMFSTWKX])\t([^\t]+)\t(.*)")


def decode(body: bytes) -> tuple[int, bool, list[tuple[str, str, str]]]:
    """A push body -> (version, full, records), refusing anything off the grammar."""
    text = body.decode("utf-8")
    assert text.endswith("\n"), "every line ends in LF"
    header, *lines = text[:-1].split("\n")
    head = HEADER.fullmatch(header)
    assert head, f"bad header {header!r}"
    records = []
    for line in lines:
        m = LINE.fullmatch(line)
        assert m, f"bad record {line[:80]!r}"
        kind, key, value = m.groups()
        assert record_problem((kind, key), value) is None, line[:80]
        records.append((kind, key, value))
    return int(head[1]), head[2] is not None, records


@pytest.fixture(scope="module")
def generated() -> list[Push]:
    pushes = generate()
    if UPDATE:
        write(pushes)
    return pushes


def test_the_encoders_still_produce_the_golden_vectors(generated: list[Push]) -> None:
    assert VECTORS.exists(), f"{VECTORS} is missing; run with FERRYMAN_UPDATE_GOLDEN=1"
    assert to_json(generated) == VECTORS.read_text(encoding="utf-8"), (
        "ferryman's records differ from the golden vectors: the wire protocol changed. "
        "If intended, rerun with FERRYMAN_UPDATE_GOLDEN=1, review the diff, and make "
        "sure the Lua and C tests (test_wire_golden_nginx.py) pass against it"
    )


def _push(name: str) -> Push:
    return next(p for p in load() if p.name == name)


@pytest.mark.parametrize("name", PUSHES)
def test_push_body_writes_the_golden_bytes(name: str) -> None:
    push = _push(name)
    assert push.body().encode() == body_bytes(push)


@pytest.mark.parametrize("name", PUSHES)
def test_the_golden_bytes_decode_to_the_golden_records(name: str) -> None:
    push = _push(name)
    assert decode(body_bytes(push)) == (push.version, push.full, push.records)


def test_the_vectors_cover_every_record_kind_and_edge() -> None:
    full, incremental, grammar = load()
    assert {r[0] for r in full.records} == KINDS == set(Record)
    assert full.full and not incremental.full and not grammar.full
    assert incremental.version == full.version + 1
    # A deletion, and a changed record, in the incremental push.
    assert any(v == "" for _, _, v in incremental.records)
    assert any(v for _, _, v in incremental.records)
    # The certificate's value holds the one tab a value may hold.
    assert any(k == Record.CERTIFICATE and "\t" in v for k, _, v in full.records)
    # Removals travel first (push_order).
    values = [v for _, _, v in incremental.records]
    assert values == sorted(values, key=bool)
    assert (GOLDEN / full.file).read_bytes().startswith(b"7 full\n")
