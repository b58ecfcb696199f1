"""The operator's guide cannot drift from the code: every flag and metric is in it."""

from __future__ import annotations

import argparse
from pathlib import Path

from ferryman.app import nic_flags
from ferryman.app.cli import parser
from ferryman.observability.metrics import Metrics

GUIDE = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()


def _run_flags(command: str = "run") -> list[str]:
    sub = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    run = sub.choices[command]
    return [
        s for a in run._actions for s in a.option_strings if s.startswith("--") and s != "--help"
    ]


def test_every_run_flag_is_documented() -> None:
    missing = [f for f in _run_flags() if f"`{f}" not in GUIDE]
    assert missing == []


def test_every_machine_controller_flag_is_documented() -> None:
    section = GUIDE.partition("## Machine deletion controller")[2].partition("\n## ")[0]
    missing = [f for f in _run_flags("machine-controller") if f"`{f}" not in section]
    assert missing == []


def test_every_metric_is_documented() -> None:
    names = {m.name for m in Metrics().registry.collect()}
    missing = sorted(n for n in names if n not in GUIDE)
    assert missing == []


def test_every_nic_flag_ferryman_reads_is_on_the_coming_from_nic_page() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "from-nic.md").read_text()
    names = [*nic_flags.RENAMED, *nic_flags.UNSUPPORTED, "enable-prometheus-metrics"]
    names += ["nginx-status", "tls-passthrough-port", "v "]
    # Families are named once with a wildcard: -app-protect-*, -plm-storage-*.
    missing = [
        n
        for n in names
        if f"`-{n}" not in page and not any(f"`-{p}*`" in page for p in _prefixes(n))
    ]
    assert missing == []


def _prefixes(name: str) -> list[str]:
    parts = name.split("-")
    return ["-".join(parts[:i]) + "-" for i in range(1, len(parts))]
