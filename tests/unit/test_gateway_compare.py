"""README's Gateway API comparison says what ferryman's own conformance report
says: its column is regenerated from docs/gateway-conformance/report.yaml, so
a report that changes without the README (or the reverse) fails here."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gateway_compare", ROOT / "scripts" / "gateway-compare.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readmes_ferryman_column_is_the_report() -> None:
    script = _script()
    readme = (ROOT / "README.md").read_text()
    start = readme.index(script.BEGIN) + len(script.BEGIN)
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in readme[start : readme.index(script.END)].splitlines()[2:]
    ]
    assert rows, "README's comparison table is empty"
    report = yaml.safe_load((ROOT / "docs/gateway-conformance/report.yaml").read_text())
    passed = script._passed(report)
    shown = {row[0].removesuffix(" (experimental)"): row[1] for row in rows}
    for name in script.PROFILES:
        for part in ("core", "extended"):
            assert shown[f"{name} {part} tests"] == script._counts(report, name, part)
    features = {k: v for k, v in shown.items() if not k.endswith(" tests")}
    assert {k for k, v in features.items() if v == "✓"} == passed & set(features)
    assert passed <= set(features) | {"Gateway", "HTTPRoute", "GRPCRoute", "TLSRoute"}
