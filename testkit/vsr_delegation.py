"""A VirtualServer delegating to VirtualServerRoutes, and the answers their routes return.

Moved from tests/integration/test_vsr_delegation.py, whose tests and others share them."""

from __future__ import annotations

from typing import Any

HOST = "cafe.test"


def vs(
    routes: list[dict[str, Any]],
    upstreams: list[dict[str, Any]] | None = None,
    namespace: str = "default",
    name: str = "cafe",
    host: str = HOST,
) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"host": host, "upstreams": upstreams or [], "routes": routes},
    }


def vsr(
    name: str,
    subroutes: list[dict[str, Any]],
    upstreams: list[dict[str, Any]] | None = None,
    namespace: str = "default",
    host: str = HOST,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        md["labels"] = labels
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServerRoute",
        "metadata": md,
        "spec": {"host": host, "upstreams": upstreams or [], "subroutes": subroutes},
    }


def answer(body: str) -> dict[str, Any]:
    return {"return": {"code": 200, "type": "text/plain", "body": body}}
