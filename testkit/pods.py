"""Pod objects with readiness gates, as the informers and the gated routing read them.

Moved from tests/unit/test_pod.py, whose tests and others share them."""

from __future__ import annotations

from typing import Any

from ferryman.resources.readiness_gate import gate_type

GATE = gate_type("ferryman")


OTHER_GATE = "example.com/warm"


def pod_obj(
    name: str = "web-1",
    ip: str = "10.0.0.1",
    gates: tuple[str, ...] = (GATE,),
    conditions: dict[str, str] | None = None,
    namespace: str = "ns",
    deleting: bool = False,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    conditions = {"ContainersReady": "True"} if conditions is None else conditions
    md: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "resourceVersion": "7",
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "labels": {"app": "web"} if labels is None else labels,
        "managedFields": [{"manager": "kubelet"}],
        "ownerReferences": [{"kind": "ReplicaSet", "name": "web-1a"}],
    }
    if deleting:
        md["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": md,
        "spec": {
            "containers": [{"name": "app", "image": "web:1", "env": [{"name": "A", "value": "b"}]}],
            "readinessGates": [{"conditionType": g} for g in gates],
            "nodeName": "n1",
        },
        "status": {
            "phase": "Running",
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "hostIP": "192.0.2.1",
            "conditions": [
                {"type": t, "status": s, "lastTransitionTime": "2026-01-01T00:00:00Z"}
                for t, s in conditions.items()
            ],
            "containerStatuses": [{"name": "app", "ready": True, "image": "web:1"}],
        },
    }
