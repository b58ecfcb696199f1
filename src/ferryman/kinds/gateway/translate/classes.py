"""Which Gateways are ferryman's, and in which order they are served."""

from __future__ import annotations

from collections.abc import Mapping

from ferryman.kinds.gateway.parse.gateway_api import Gateway


def skipped(class_name: str, controllers: Mapping[str, str]) -> str:
    """Why a Gateway of ``class_name`` is not ferryman's to serve."""
    if class_name not in controllers:
        return f"GatewayClass {class_name} does not exist (or is invalid)"
    return (
        f"GatewayClass {class_name} is {controllers[class_name]}'s; ferryman serves the "
        "GatewayClasses whose controllerName is --gateway-controller-name's"
    )


def age(g: Gateway) -> tuple[str, str, str]:
    """The oldest first (creationTimestamp, then namespace/name)."""
    return (g.meta.creation_timestamp or "", g.meta.namespace, g.meta.name)
