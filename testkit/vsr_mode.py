"""A VirtualServer and its VirtualServerRoutes as Kubernetes mode's tests apply them.

Moved from tests/kubernetes/test_vsr_mode.py, whose tests and others share them."""

from __future__ import annotations

from typing import Any

HOST = "vsr.k8s.test"


def _vs(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": {"name": "cafe", "namespace": namespace},
        "spec": {"host": HOST, "routes": [{"path": "/tea", "route": "tea"}]},
    }


def _vsr(namespace: str, name: str, service: str, host: str = HOST) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServerRoute",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "host": host,
            "upstreams": [{"name": "up", "service": service, "port": 80}],
            "subroutes": [{"path": "/tea", "action": {"pass": "up"}}],
        },
    }
