"""charts/ferryman/dashboards/ferryman.json asks only for metrics ferryman exports:
every name in its queries is in docs/operations.md's metric table, and those
ferryman registers up front (not read from NGINX at scrape time) are in its
registry under that name."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ferryman.observability.metrics import Metrics

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "charts" / "ferryman" / "dashboards" / "ferryman.json"
_NAME = re.compile(r"\b(?:nginx_ingress|ferryman)_[a-z0-9_]+")
_SUFFIXES = ("_bucket", "_count", "_sum")
# Read from NGINX (stub_status, the module's counters) when /metrics is scraped.
_AT_SCRAPE = ("nginx_ingress_nginx_", "ferryman_requests_in_flight", "ferryman_upstream_server_")


def _queried() -> set[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in _NAME.findall(target["expr"])
    }


def _documented() -> set[str]:
    """The metric table's names; ``_reading``-style entries extend the name before."""
    names: set[str] = set()
    for line in (ROOT / "docs" / "operations.md").read_text().splitlines():
        if not line.startswith("| `") or not _NAME.match(line[3:]):
            continue
        first = ""
        for token in re.findall(r"`([a-z0-9_]+)", line.split("|")[1]):
            if token.startswith("_"):
                names.add(first.rsplit("_", 1)[0] + token)
            else:
                first = token
                names.add(token)
    return names


def _base(name: str) -> str:
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            return name.removesuffix(suffix)
    return name


def test_every_queried_metric_is_documented_and_exported() -> None:
    queried = _queried()
    assert len(queried) >= 15
    documented = _documented()
    registered = {
        name
        for family in Metrics().registry.collect()
        for name in (family.name, f"{family.name}_total")
    }
    for name in sorted(queried):
        base = _base(name)
        assert base in documented or base.removesuffix("_total") in documented, name
        if not name.startswith(_AT_SCRAPE):
            assert base in registered, name
