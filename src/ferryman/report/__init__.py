"""Events, as NIC reports them.

In manifests mode an Event is a structured log line; in Kubernetes mode the
reporter writes events.k8s.io/v1 objects (and, as leader, status).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ferryman.resources.meta import ObjectRef

NORMAL = "Normal"
WARNING = "Warning"

ADDED_OR_UPDATED = "AddedOrUpdated"
ADDED_OR_UPDATED_WITH_WARNING = "AddedOrUpdatedWithWarning"
ADDED_OR_UPDATED_WITH_ERROR = "AddedOrUpdatedWithError"
REJECTED = "Rejected"

# The ``status.state`` of NIC's custom resources.
VALID, WARNING_STATE, INVALID = "Valid", "Warning", "Invalid"

log = logging.getLogger("ferryman.events")


class Reporter(Protocol):
    def event(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None: ...


# Gateway API status (Kubernetes mode's KubernetesReporter.gateway_api_status):
# for a GatewayClass or Gateway its whole ``status`` (conditions without
# lastTransitionTime, which the writer keeps from the object while a
# condition's status stays, else sets to now); for an HTTPRoute
# ``{"parents": [...]}``, this controller's entries only (the writer keeps
# other controllers'). Leader-only, retried, skipped when already there.
GatewayStatusSink = Callable[[ObjectRef, Mapping[str, Any]], None]
# An Ingress's load-balancer addresses (Kubernetes mode): () clears them.
IngressStatusSink = Callable[[ObjectRef, tuple[str, ...]], None]


class LogReporter:
    """Events as log lines: ``kind``, ``namespace``, ``name``, ``reason``, ``message``."""

    def event(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        level = logging.INFO if type_ == NORMAL else logging.WARNING
        log.log(
            level,
            "event",
            extra={
                "fields": {
                    "kind": ref.kind,
                    "namespace": ref.namespace,
                    "name": ref.name,
                    "type": type_,
                    "reason": reason,
                    "message": message,
                }
            },
        )

    def gateway_api_status(self, ref: ObjectRef, status: Mapping[str, Any]) -> None:
        """Manifests mode: a Gateway API object's status as a log line."""
        log.info(
            "status",
            extra={
                "fields": {
                    "kind": ref.kind,
                    "namespace": ref.namespace,
                    "name": ref.name,
                    "status": dict(status),
                }
            },
        )


class RecordingReporter:
    """Keeps events in memory; ``ferryman render`` and tests read them back."""

    def __init__(self) -> None:
        self.events: list[tuple[ObjectRef, str, str, str]] = []

    def event(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        self.events.append((ref, type_, reason, message))
