"""docs/from-nic.md's and docs/ingress-nginx.md's annotation and ConfigMap tables
are what the parsers know: scripts/doc-tables.py --check fails when a key is
added, refused or renamed in the code and a page says otherwise."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_generated_tables_are_current() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "doc-tables.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr


def test_a_stale_table_is_caught(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "from-nic.md").read_text()
    stale = page.replace("| `nginx.org/proxy-set-headers` | served", "| `nginx.org/x` | served")
    assert stale != page
    spec = importlib.util.spec_from_file_location("tables", ROOT / "scripts" / "doc-tables.py")
    assert spec is not None and spec.loader is not None
    tables = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tables)
    assert tables.render(stale) == page


def _block(page: str, name: str) -> str:
    return page.split(f"<!-- generated: {name} -->\n")[1].split(f"<!-- end: {name} -->")[0]


def test_the_coverage_counts_are_the_tables_rows_by_status() -> None:
    """Issue 29's measure, counted here from the page's own table rows (not from
    the code that wrote them): a row's status is how its ferryman cell begins."""
    page = (ROOT / "docs" / "from-nic.md").read_text()
    rows = [
        tuple(cell.strip() for cell in line.strip("|").split("|"))
        for name in ("annotations", "configmap-keys")
        for line in _block(page, name).splitlines()[2:]
    ]

    def counts(picked: list[str]) -> list[int]:
        statuses = ("served", "accepted", "refused")
        assert all(c.startswith(statuses) for c in picked)
        return [sum(c.startswith(s) for c in picked) for s in statuses] + [len(picked)]

    plus = ("NGINX Plus", "App Protect")
    keys = [c for k, c in rows if not k.startswith("`nginx.")]
    want = {
        "`nginx.org/*` annotations": counts([c for k, c in rows if k.startswith("`nginx.org/")]),
        "`nginx.com/*` annotations (NGINX Plus)": counts(
            [c for k, c in rows if k.startswith("`nginx.com/")]
        ),
        "ConfigMap keys of open-source NGINX": counts(
            [c for c in keys if not any(p in c for p in plus)]
        ),
        "ConfigMap keys of NGINX Plus, App Protect and OIDC": counts(
            [c for c in keys if any(p in c for p in plus)]
        ),
    }
    shown = {
        cells[0]: [int(n) for n in cells[1:]]
        for line in _block(page, "coverage").splitlines()[2:]
        for cells in [[c.strip() for c in line.strip("|").split("|")]]
    }
    assert shown == want
    # Every annotation NIC serves on open-source NGINX is at least accepted.
    assert shown["`nginx.org/*` annotations"][2] == 0
