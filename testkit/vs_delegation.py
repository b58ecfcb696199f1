"""VirtualServerRoute documents and a reads view for delegation's unit tests.

Moved from tests/unit/test_vs_delegation.py, whose tests and others share them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ferryman.kinds.virtualserver.parse.virtualserverroute import (
    VirtualServerRoute,
    parse_virtual_server_route,
)
from ferryman.resources.nic_fields import Parsed


def _vsr(name: str, *paths: str, namespace: str = "default", **extra: Any) -> dict[str, Any]:
    labels = extra.pop("labels", {})
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServerRoute",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "host": "cafe.test",
            "upstreams": [{"name": "up", "service": "svc", "port": 80}],
            "subroutes": [{"path": p, "action": {"pass": "up"}} for p in paths],
            **extra,
        },
    }


class Reads:
    def __init__(self, *docs: dict[str, Any]) -> None:
        self.parsed = {
            (d["metadata"]["namespace"], d["metadata"]["name"]): parse_virtual_server_route(d)
            for d in docs
        }

    def route(self, namespace: str, name: str) -> Parsed[VirtualServerRoute] | None:
        return self.parsed.get((namespace, name))

    def selected_routes(self, labels: Mapping[str, str]) -> list[VirtualServerRoute]:
        found = [p.resource for _, p in sorted(self.parsed.items()) if p.resource]
        return [v for v in found if all(v.meta.labels.get(k) == x for k, x in labels.items())]
