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
