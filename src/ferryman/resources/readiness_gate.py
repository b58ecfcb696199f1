"""Pod readiness gates: the names ferryman uses and which pods a gate is for.

A pod gets ferryman's gate when its namespace opts in (``INJECT_LABEL``) and its
labels match the selector of a Service that an Ingress ferryman serves
references. The gate's condition type names the Ingress class, so two ferryman
installations with different classes gate the same pod independently.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ferryman.resources.service import Service

# A namespace label: "enabled" opts its pods in.
INJECT_LABEL = "ferryman.io/pod-readiness-gate-inject"
INJECT_ENABLED = "enabled"
GATE_PREFIX = "target-health.ferryman.io/"


def gate_type(ingress_class: str) -> str:
    """The pod condition type of ``ingress_class``'s readiness gate."""
    return GATE_PREFIX + ingress_class


def opted_in(namespace_labels: Mapping[str, str] | None) -> bool:
    return (namespace_labels or {}).get(INJECT_LABEL) == INJECT_ENABLED


def selects(service: Service, pod_labels: Mapping[str, str]) -> bool:
    """Whether ``service``'s selector matches a pod with ``pod_labels`` (as the
    EndpointSlice controller matches: every selector pair present; an empty or
    absent selector selects nothing)."""
    if not service.selector:
        return False
    return all(pod_labels.get(k) == v for k, v in service.selector.items())


def gated_by(services: Iterable[Service], pod_labels: Mapping[str, str]) -> list[Service]:
    """The served ``services`` that select the pod: its gate is wanted when any do."""
    return [s for s in services if selects(s, pod_labels)]
