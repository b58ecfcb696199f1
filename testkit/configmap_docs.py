"""NIC's nginx-config ConfigMap as a manifest, and the Events its reader reports.

Moved from tests/integration/test_configmap.py, whose tests and others share them."""

from __future__ import annotations

from typing import Any

from testkit.harness import (
    Ferryman,
    eventually,
)

NS, NAME = "nginx-ingress", "nginx-config"


def configmap(*, name: str = NAME, namespace: str = NS, **data: str) -> dict[str, Any]:
    """A ConfigMap (NIC's nginx-config unless named) with ``data``'s keys, _ as -."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": {k.replace("_", "-"): v for k, v in data.items()},
    }


def _events(f: Ferryman) -> list[tuple[str, str, str]]:
    return [
        (e["type"], e["reason"], e["message"])
        for e in f.events()
        if e.get("kind") == "ConfigMap" and e.get("name") == NAME
    ]


def _updated(f: Ferryman, count: int) -> list[tuple[str, str, str]]:
    """Waits for the ``count``-th update Event on the ConfigMap."""

    def seen() -> list[tuple[str, str, str]]:
        done = [e for e in _events(f) if e[1] in ("Updated", "UpdatedWithError")]
        return done if len(done) >= count else []

    return eventually(seen, 60, f"update Event {count}")
