"""The NGINX locations a fast-path record holds.

Moved from tests/unit/test_vs_fast.py, whose tests and others share them."""

from __future__ import annotations


def locations(record: str | None) -> list[str]:
    """Each location item's fast/slow marker, in order."""
    assert record is not None
    tokens = record.split(" ")
    return [tokens[i + 4] for i, t in enumerate(tokens) if t == "l"]
