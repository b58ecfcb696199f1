"""Where objects come from: a manifests directory or the Kubernetes API.

A source delivers upserts and deletions of raw objects to a ``Sink`` and says
once when its initial state is complete.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ferryman.resources.meta import ObjectRef

KINDS = (
    "Ingress",
    "IngressClass",
    "Service",
    "EndpointSlice",
    "Secret",
    # NIC's custom resources (k8s.nginx.org/v1): VirtualServers route, with the
    # VirtualServerRoutes they delegate to; Policies are held for what comes next.
    "VirtualServer",
    "VirtualServerRoute",
    "Policy",
    # --nginx-configmaps: NIC's nginx-config (only the one named is read).
    "ConfigMap",
    # TCP/UDP listeners (--global-configuration) and the TransportServers on them.
    "GlobalConfiguration",
    "TransportServer",
    # Gateway API (--enable-gateway-api), and Namespaces for the labels
    # listeners' allowedRoutes select by.
    "GatewayClass",
    "Gateway",
    "HTTPRoute",
    "ReferenceGrant",
    "Namespace",
)
CLUSTER_SCOPED = frozenset({"IngressClass", "GatewayClass", "Namespace"})


class Sink(Protocol):
    def upsert(self, obj: Mapping[str, Any]) -> None: ...
    def delete(self, ref: ObjectRef) -> None: ...
