"""The wire protocol's golden vectors (tests/golden/wire/push.json): made from
manifests by ferryman's own render pipeline, so they are what ferryman really
pushes, and read back by the Python, Lua and C tests (test_wire_golden*.py)."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ferryman.app.render import render
from ferryman.engine.settings import GatewaySettings, ListenSettings, Settings, TransportSettings
from ferryman.wire.push import push_body, push_order
from ferryman.wire.records import Record, RecordKey

GOLDEN = Path(__file__).resolve().parent.parent / "tests" / "golden" / "wire"
VECTORS = GOLDEN / "push.json"
GLOBAL_CONFIGURATION = ("nginx-ingress", "nginx-configuration")
GATEWAY_ADDRESS = "127.0.55.100"
PUSHES = ("full", "incremental", "grammar")
# The first push's version (the next push's is one more).
VERSION = 7

ABOUT = [
    "Golden vectors of ferryman's wire protocol (ferryman.wire): push bodies as",
    "POST /push on the data plane's unix socket receives them, and the records",
    "each body carries, which the Python (tests/unit/test_wire_golden.py), Lua",
    "and C (tests/integration/test_wire_golden_nginx.py) tests all decode.",
    "",
    "Format: 'pushes' is a list, in the order they are sent; each has 'name',",
    "'file' (the exact body bytes, beside this file), 'version', 'full' (the",
    "header line is '<version> full', else '<version>') and 'records': [kind,",
    "key, value] in body order, value '' removing the record. A body is the",
    "header line and one line per record, 'kind TAB key TAB value', each line",
    "ending in LF (grammar: src/ferryman/dataplane/lua/ferryman.lua's header).",
    "'kinds' names every Record kind (ferryman.wire.records.Record).",
    "",
    "How they were made: 'full' is ferryman render (ferryman.app.render.render,",
    "which runs the controller and every kind's encoder) of manifests/ (fixed",
    "test PKI in manifests/secrets.yaml), in push_order, as push_body(7, ..., full=True).",
    "'incremental' is what changed when changes/ replaces files of manifests/ and",
    "wild.yaml is deleted (a changed endpoint set, a host removed: value ''), as",
    "push_body(8, ..., full=False). 'grammar' is hand-made, not from an encoder:",
    "keys and values holding every character the grammar permits (record_problem),",
    "and the removal of a record never pushed.",
    "",
    "Regenerate: FERRYMAN_UPDATE_GOLDEN=1 uv run pytest tests/unit/test_wire_golden.py,",
    "then review the diff: a changed vector is a changed protocol, and the Lua",
    "and C tests must still pass against it.",
]

REMOVED = ("wild.yaml",)

# Every printable ASCII character but the space may be in a key; a value may
# hold spaces and any non-control character (UTF-8 too).
PRINTABLE = "".join(chr(c) for c in range(0x21, 0x7F))
GRAMMAR_RECORDS: list[tuple[str, str, str]] = [
    (Record.ENDPOINTS, f"odd/{PRINTABLE}\u00fc", "127.0.55.9#1 fd00::1#65535"),
    (Record.ENDPOINTS, "never/pushed:80", ""),
    (Record.HOST, "grammar.example.com", f"- 0 - rr:1:10 E|/{PRINTABLE.replace('|', '')}|odd/x"),
    (Record.ROUTING, "grammar.example.com", "- caf\u00e9 \u2603  two  spaces ~"),
]


@dataclass(frozen=True)
class Push:
    name: str
    version: int
    full: bool
    records: list[tuple[str, str, str]]

    @property
    def file(self) -> str:
        return f"push-{self.name}.txt"

    def body(self) -> str:
        return push_body(self.version, {(k, n): v for k, n, v in self.records}, self.full)


def _render(manifests: Path) -> dict[RecordKey, str]:
    with tempfile.TemporaryDirectory(prefix="ferryman-wire-") as tmp:
        out = Path(tmp) / "out"
        settings = Settings(
            state_dir=out,
            manifests=manifests,
            listen=ListenSettings(http_port=18080, https_port=18443),
            transport=TransportSettings(global_configuration=GLOBAL_CONFIGURATION),
            gateway=GatewaySettings(enabled=True, addresses=(GATEWAY_ADDRESS,)),
        )
        problems = asyncio.run(render(settings, out))
        assert not problems, problems
        text = (out / "records.txt").read_text()
    header, *lines = text[:-1].split("\n")
    assert header == "0 full", header
    return {(kind, key): value for kind, key, value in (line.split("\t", 2) for line in lines)}


def _listed(records: dict[RecordKey, str]) -> list[tuple[str, str, str]]:
    return [(k, n, v) for (k, n), v in push_order(dict(sorted(records.items()))).items()]


def generate() -> list[Push]:
    """The vectors, from the manifests under GOLDEN with the current encoders."""
    before = _render(GOLDEN / "manifests")
    with tempfile.TemporaryDirectory(prefix="ferryman-wire-") as tmp:
        after_dir = Path(tmp) / "manifests"
        shutil.copytree(GOLDEN / "manifests", after_dir)
        for name in REMOVED:
            (after_dir / name).unlink()
        for changed in (GOLDEN / "changes").iterdir():
            shutil.copy(changed, after_dir / changed.name)
        after = _render(after_dir)
    changes = {
        k: after.get(k, "") for k in before.keys() | after.keys() if before.get(k) != after.get(k)
    }
    return [
        Push("full", VERSION, True, _listed(before)),
        Push("incremental", VERSION + 1, False, _listed(changes)),
        Push("grammar", VERSION + 2, False, GRAMMAR_RECORDS),
    ]


def to_json(pushes: list[Push]) -> str:
    doc: dict[str, Any] = {
        "about": ABOUT,
        "kinds": {r.name: r.value for r in Record},
        "pushes": [
            {
                "name": p.name,
                "file": p.file,
                "version": p.version,
                "full": p.full,
                "records": [list(r) for r in p.records],
            }
            for p in pushes
        ],
    }
    return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"


def load() -> list[Push]:
    """The vectors as committed."""
    doc = json.loads(VECTORS.read_text(encoding="utf-8"))
    return [
        Push(p["name"], p["version"], p["full"], [tuple(r) for r in p["records"]])
        for p in doc["pushes"]
    ]


def body_bytes(push: Push) -> bytes:
    """The committed body of ``push``, byte for byte."""
    return (GOLDEN / push.file).read_bytes()


def write(pushes: list[Push]) -> None:
    VECTORS.write_text(to_json(pushes), encoding="utf-8")
    for p in pushes:
        (GOLDEN / p.file).write_bytes(p.body().encode())


def state_after(pushes: list[Push]) -> dict[str, str]:
    """What the data plane holds after ``pushes`` in order, as ferryman_records.lua
    names it in its dict: "<kind>:<key>" -> value. X records go to
    ngx_http_ferryman_module's zone only (Lua routes by the W beside each)."""
    held: dict[str, str] = {}
    for p in pushes:
        if p.full:
            held.clear()
        for kind, key, value in p.records:
            if kind == Record.GATEWAY_FAST:
                continue
            if value:
                held[f"{kind}:{key}"] = value
            else:
                held.pop(f"{kind}:{key}", None)
    return held
