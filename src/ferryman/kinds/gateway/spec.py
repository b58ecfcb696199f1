"""Gateway API's kinds (gateway.networking.k8s.io) as the engine knows them:
read with --enable-gateway-api only; their CRDs are the Gateway API's own."""

from __future__ import annotations

from ferryman.engine.kind_spec import OWN, KindSpec
from ferryman.engine.settings import Settings
from ferryman.kinds.gateway.parse.backend_tls import CA_KEY

GROUP = "gateway.networking.k8s.io"


def _enabled(settings: Settings) -> bool:
    return settings.gateway.enabled


def _grants(settings: Settings) -> bool:
    """Gateway API's references across namespaces, and tenant mode's
    (--allowed-host-suffixes, configs/tenancy.py)."""
    return settings.gateway.enabled or bool(settings.allowed_host_suffixes)


# A listener's allowedRoutes select namespaces by their labels.
_NAMESPACES = ("Namespace",)
GATEWAY_CLASS = KindSpec(
    "GatewayClass", GROUP, "v1", "gatewayclasses", namespaced=False, custom=True,
    enabled=_enabled, needs=_NAMESPACES, status=OWN, counted=False,
)  # fmt: skip
# Its listeners' client certificate validation reads CA ConfigMaps' ca.crt too.
GATEWAY = KindSpec(
    "Gateway", GROUP, "v1", "gateways", custom=True, enabled=_enabled,
    needs=(*_NAMESPACES, "ConfigMap"), configmap_keys=(CA_KEY,), status=OWN,
)  # fmt: skip
HTTP_ROUTE = KindSpec(
    "HTTPRoute", GROUP, "v1", "httproutes", custom=True, enabled=_enabled, needs=_NAMESPACES,
    status=OWN,
)  # fmt: skip
# v1 since Gateway API v1.5's standard channel (v1alpha2 before, experimental).
TLS_ROUTE = KindSpec(
    "TLSRoute", GROUP, "v1", "tlsroutes", custom=True, enabled=_enabled, needs=_NAMESPACES,
    status=OWN,
)  # fmt: skip
# v1 since Gateway API v1.1's standard channel.
GRPC_ROUTE = KindSpec(
    "GRPCRoute", GROUP, "v1", "grpcroutes", custom=True, enabled=_enabled, needs=_NAMESPACES,
    status=OWN,
)  # fmt: skip
# v1beta1: served by every standard channel since v0.6; v1.6 serves v1 too
# but still stores v1beta1 (its CRD), so v1beta1 reaches the most clusters.
REFERENCE_GRANT = KindSpec(
    "ReferenceGrant", GROUP, "v1beta1", "referencegrants", custom=True, enabled=_grants,
    referenced=True, counted=False,
)  # fmt: skip
# v1 since Gateway API v1.4's standard channel; its CA certificates are
# ConfigMaps' ca.crt (every ConfigMap is then watched, held with that key only).
BACKEND_TLS_POLICY = KindSpec(
    "BackendTLSPolicy", GROUP, "v1", "backendtlspolicies", custom=True, enabled=_enabled,
    needs=("ConfigMap",), configmap_keys=(CA_KEY,), status=OWN, counted=False,
)  # fmt: skip
# v1 since Gateway API v1.5's standard channel: listeners a Gateway takes from
# other namespaces (its allowedListeners); a Gateway's Selector reads Namespaces.
LISTENER_SET = KindSpec(
    "ListenerSet", GROUP, "v1", "listenersets", custom=True, enabled=_enabled, needs=_NAMESPACES,
    status=OWN,
)  # fmt: skip
SPECS = (
    GATEWAY_CLASS, GATEWAY, LISTENER_SET, HTTP_ROUTE, GRPC_ROUTE, TLS_ROUTE, REFERENCE_GRANT,
    BACKEND_TLS_POLICY,
)  # fmt: skip
