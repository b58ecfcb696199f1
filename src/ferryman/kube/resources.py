"""The API's kinds, models and client types the rest of ferryman names: from
here, so that only ``ferryman.kube`` imports lightkube."""

from __future__ import annotations

from typing import Any

from lightkube import AsyncClient
from lightkube.config.kubeconfig import KubeConfig
from lightkube.core.exceptions import LoadResourceError
from lightkube.core.resource_registry import resource_registry
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.core_v1 import ObjectReference
from lightkube.models.meta_v1 import DeleteOptions, ObjectMeta, Preconditions
from lightkube.resources.admissionregistration_v1 import MutatingWebhookConfiguration
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import (
    ConfigMap,
    Namespace,
    Node,
    Pod,
    PodStatus,
    Secret,
    Service,
)
from lightkube.resources.discovery_v1 import EndpointSlice
from lightkube.resources.events_v1 import Event
from lightkube.resources.networking_v1 import Ingress, IngressClass, IngressStatus
from lightkube.types import PatchType

from ferryman.engine.kind_spec import KindSpec

__all__ = [
    "AsyncClient",
    "ConfigMap",
    "DeleteOptions",
    "EndpointSlice",
    "Event",
    "Ingress",
    "IngressClass",
    "IngressStatus",
    "KubeConfig",
    "Lease",
    "LeaseSpec",
    "MutatingWebhookConfiguration",
    "Namespace",
    "Node",
    "ObjectMeta",
    "ObjectReference",
    "PatchType",
    "Pod",
    "PodStatus",
    "Preconditions",
    "Secret",
    "Service",
    "create_global_resource",
    "create_namespaced_resource",
    "resource_for",
]


def resource_for(spec: KindSpec) -> Any:
    """The lightkube class a kind is read and written by: Kubernetes' own
    typed one where there is one (lightkube's registry, keyed by apiVersion
    and kind), else a generic resource (custom resources)."""
    if not spec.custom:
        try:
            return resource_registry.load(spec.api_version, spec.kind)
        except LoadResourceError:
            pass
    create = create_namespaced_resource if spec.namespaced else create_global_resource
    return create(spec.group, spec.version, spec.kind, spec.plural)
