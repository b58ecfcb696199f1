#!/usr/bin/env python3
"""Write the docs' generated tables: in docs/from-nic.md every NIC annotation
and ConfigMap key ferryman knows (and their counts by status), in
docs/ingress-nginx.md every ingress-nginx annotation and ConfigMap key, and
what ferryman does with each.

Usage: .venv/bin/python scripts/doc-tables.py [--check]
The tables sit between ``<!-- generated: NAME -->`` and ``<!-- end: NAME -->``
lines; they come from the parsers' own tables (the Ingress kind's KNOWN,
OTHER_NIC and PLUS_ONLY and its ingress-nginx ENTRIES, the ConfigMaps' key
tables), so the pages cannot drift from the code. ``--check`` exits 1 when a
page is stale (tests/unit/test_doc_tables.py).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from ferryman.configs import ingress_nginx_configmap as inn_configmap
from ferryman.kinds.ingress.parse import ingress_nginx
from ferryman.kinds.ingress.parse.annotations import KNOWN, OTHER_NIC, PLUS_ONLY, PREFIX
from ferryman.resources.configmap import (
    GLOBAL_KEYS,
    OWN_KEYS,
    ROUTE_KEYS,
    STATUS_KEYS,
    UNSUPPORTED,
)

ROOT = Path(__file__).resolve().parents[1]


def annotations() -> str:
    return _table(("annotation", "ferryman"), annotation_rows())


def annotation_rows() -> list[tuple[str, str]]:
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
    return sorted(rows)


def configmap_keys() -> str:
    return _table(("key", "ferryman"), configmap_rows())


def configmap_rows() -> list[tuple[str, str]]:
    rows = [(f"`{k}`", "served (docs/operations.md, ConfigMap)") for k in GLOBAL_KEYS]
    # NIC's keys: ferryman's own (OWN_KEYS) are docs/operations.md's.
    rows += [
        (f"`{k}`", "served, the default of every route") for k in ROUTE_KEYS if k not in OWN_KEYS
    ]
    rows += [(f"`{k}`", "served (status addresses)") for k in STATUS_KEYS]
    rows += [(f"`{k}`", f"refused with a Warning: {why}") for k, why in UNSUPPORTED.items()]
    return sorted(rows)


# A row's status is how its "ferryman" cell begins.
STATUSES = ("served", "accepted", "refused")
# What only NGINX Plus (or its commercial modules) has: counted apart, since
# no open-source NGINX serves them, NIC's included.
_PLUS = ("NGINX Plus", "App Protect")


def status(cell: str) -> str:
    return next(s for s in STATUSES if cell.startswith(s))


def coverage() -> str:
    """The rows of the tables below, counted by status (issue 29's measure)."""
    annotations = annotation_rows()
    keys = configmap_rows()
    groups = [
        ("`nginx.org/*` annotations", [c for a, c in annotations if a.startswith("`nginx.org/")]),
        ("`nginx.com/*` annotations (NGINX Plus)",
         [c for a, c in annotations if a.startswith("`nginx.com/")]),
        ("ConfigMap keys of open-source NGINX",
         [c for _, c in keys if not any(p in c for p in _PLUS)]),
        ("ConfigMap keys of NGINX Plus, App Protect and OIDC",
         [c for _, c in keys if any(p in c for p in _PLUS)]),
    ]  # fmt: skip
    lines = [
        "| table | served | accepted with a Warning, not applied | refused | rows |",
        "|---|---|---|---|---|",
    ]
    for name, cells in groups:
        counts = [sum(status(c) == s for c in cells) for s in STATUSES]
        lines.append(f"| {name} | {' | '.join(map(str, counts))} | {len(cells)} |")
    return "\n".join(lines)


def _table(header: tuple[str, str], rows: list[tuple[str, str]]) -> str:
    lines = [f"| {header[0]} | {header[1]} |", "|---|---|"]
    lines += [f"| {a} | {b} |" for a, b in rows]
    return "\n".join(lines)


def ingress_nginx_annotations() -> str:
    keys = sorted(ingress_nginx.ENTRIES.keys() | ingress_nginx.KNOWN_NOT_YET)
    rows = []
    for key in keys:
        e = ingress_nginx.entry(key)
        assert e is not None
        rows.append((f"`{key}`", e.status, e.note.replace("|", "\\|")))
    lines = ["| annotation | ferryman | how |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)


def ingress_nginx_configmap_keys() -> str:
    rows = []
    for key, (target, _) in sorted(inn_configmap.KEYS.items()):
        if target in OWN_KEYS:
            rows.append((f"`{key}`", f"served, as ferryman's `{target}` (docs/operations.md)"))
        else:
            rows.append((f"`{key}`", f"served, as NIC's `{target}`"))
    rows += [
        (f"`{k}`", "served: real-ip settings, as ingress-nginx writes them")
        for k in inn_configmap.REAL_IP
    ]
    rows += [
        ("`log-format-upstream`", "served, as NIC's `log-format` (its variables mapped)"),
        ("`use-http2`", "served, as NIC's `http2`"),
    ]
    rows += [(f"`{k}`", "refused: NGINX text from users") for k in inn_configmap.SNIPPETS]
    rows += [(f"`{k}`", "not applied yet (a Warning names it)") for k in inn_configmap.KNOWN]
    return _table(("key", "ferryman"), sorted(rows))


PAGES = {
    ROOT / "docs" / "from-nic.md": {
        "coverage": coverage,
        "annotations": annotations,
        "configmap-keys": configmap_keys,
    },
    ROOT / "docs" / "ingress-nginx.md": {
        "ingress-nginx-annotations": ingress_nginx_annotations,
        "ingress-nginx-configmap-keys": ingress_nginx_configmap_keys,
    },
}


def render(text: str, page: Path = ROOT / "docs" / "from-nic.md") -> str:
    for name, build in PAGES[page].items():
        pattern = re.compile(
            rf"(<!-- generated: {name} -->\n)(?:.*?\n)?(<!-- end: {name} -->)", re.DOTALL
        )
        if not pattern.search(text):
            raise SystemExit(f"{page}: no <!-- generated: {name} --> block")
        text = pattern.sub(lambda m, b=build: m.group(1) + b() + "\n" + m.group(2), text)
    return text


def main() -> None:
    stale = False
    for page in PAGES:
        text = page.read_text()
        new = render(text, page)
        if "--check" in sys.argv[1:]:
            if new != text:
                print(f"{page} is stale: run scripts/doc-tables.py", file=sys.stderr)
                stale = True
            continue
        page.write_text(new)
    if stale:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
