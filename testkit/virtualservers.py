"""VirtualServer documents and starting ferryman with them and real backends.

Moved from tests/integration/test_virtualserver.py, whose tests and others share them."""

from __future__ import annotations

from typing import Any

from testkit.harness import (
    Backends,
    Ferryman,
    service_with_backends,
)


def vs(
    name: str,
    host: str,
    routes: list[dict[str, Any]],
    upstreams: list[dict[str, Any]] | None = None,
    created: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name, "namespace": "default"}
    if created:
        md["creationTimestamp"] = created
    if upstreams is None:
        upstreams = [{"name": s, "service": s, "port": 80} for s in ("a", "b", "c")]
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": md,
        "spec": {"host": host, "upstreams": upstreams, "routes": routes, **spec},
    }


def to(upstream: str) -> dict[str, Any]:
    return {"pass": upstream}


def start_with_backends(f: Ferryman, backends: Backends, *docs: dict[str, Any]) -> None:
    for name in ("a", "b", "c"):
        f.write(f"svc-{name}", service_with_backends(name, [backends.start(name)]))
    for i, d in enumerate(docs):
        f.write(f"doc{i}", d)
    f.start()
