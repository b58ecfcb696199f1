#!/usr/bin/env python3
"""Write docs/from-nic.md's generated tables: every NIC annotation and ConfigMap
key ferryman knows, and what it does with each.

Usage: .venv/bin/python scripts/from-nic-tables.py [--check]
The tables sit between ``<!-- generated: NAME -->`` and ``<!-- end: NAME -->``
lines; they come from the parsers' own tables (the Ingress kind's KNOWN,
OTHER_NIC and PLUS_ONLY, the ConfigMap's key tables), so the page cannot drift
from the code. ``--check`` exits 1 when the page is stale (tests/unit/test_from_nic.py).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from ferryman.kinds.ingress.parse.annotations import KNOWN, OTHER_NIC, PLUS_ONLY, PREFIX
from ferryman.resources.configmap import GLOBAL_KEYS, ROUTE_KEYS, STATUS_KEYS, UNSUPPORTED

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "from-nic.md"


def annotations() -> str:
    rows = [(f"`{PREFIX}{k}`", "served (docs/operations.md, Ingress annotations)") for k in KNOWN]
    rows += [
        (
            f"`{PREFIX}{k}`",
            "accepted, not applied yet: the Ingress is served with a Warning naming it",
        )
        for k in OTHER_NIC
    ]
    rows += [
        (f"`{k}`", "refused: NGINX Plus only (NIC refuses it on open-source NGINX too)")
        for k in PLUS_ONLY
    ]
    return _table(("annotation", "ferryman"), sorted(rows))


def configmap_keys() -> str:
    rows = [(f"`{k}`", "served (docs/operations.md, ConfigMap)") for k in GLOBAL_KEYS]
    rows += [(f"`{k}`", "served, the default of every route") for k in ROUTE_KEYS]
    rows += [(f"`{k}`", "served (status addresses)") for k in STATUS_KEYS]
    rows += [(f"`{k}`", f"refused with a Warning: {why}") for k, why in UNSUPPORTED.items()]
    return _table(("key", "ferryman"), sorted(rows))


def _table(header: tuple[str, str], rows: list[tuple[str, str]]) -> str:
    lines = [f"| {header[0]} | {header[1]} |", "|---|---|"]
    lines += [f"| {a} | {b} |" for a, b in rows]
    return "\n".join(lines)


TABLES = {"annotations": annotations, "configmap-keys": configmap_keys}


def render(text: str) -> str:
    for name, build in TABLES.items():
        pattern = re.compile(
            rf"(<!-- generated: {name} -->\n)(?:.*?\n)?(<!-- end: {name} -->)", re.DOTALL
        )
        if not pattern.search(text):
            raise SystemExit(f"{PAGE}: no <!-- generated: {name} --> block")
        text = pattern.sub(lambda m, b=build: m.group(1) + b() + "\n" + m.group(2), text)
    return text


def main() -> None:
    text = PAGE.read_text()
    new = render(text)
    if "--check" in sys.argv[1:]:
        if new != text:
            print(f"{PAGE} is stale: run scripts/from-nic-tables.py", file=sys.stderr)
            raise SystemExit(1)
        return
    PAGE.write_text(new)


if __name__ == "__main__":
    main()
