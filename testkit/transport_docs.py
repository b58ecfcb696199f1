"""NIC's stream resources as the tests write them: the GlobalConfiguration ferryman
is pointed at (``--global-configuration``) and TransportServers."""

from __future__ import annotations

from typing import Any

GC = ("nginx-ingress", "nginx-configuration")


def global_configuration(*listeners: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "GlobalConfiguration",
        "metadata": {"name": GC[1], "namespace": GC[0]},
        "spec": {"listeners": list(listeners)},
    }


def transport_server(
    name: str, listener: str, protocol: str, service: str, port: int, **spec: Any
) -> dict[str, Any]:
    """One upstream ("app") the action passes to; ``spec`` adds fields (``host``
    for TLS passthrough) or ``metadata``."""
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "TransportServer",
        "metadata": {"name": name, "namespace": "default", **spec.pop("metadata", {})},
        "spec": {
            "listener": {"name": listener, "protocol": protocol},
            "upstreams": [{"name": "app", "service": service, "port": port}],
            "action": {"pass": "app"},
            **spec,
        },
    }
