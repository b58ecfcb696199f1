"""ferryman.gates.pods: the pending pods read from the Store, and whether a
served Service selects them."""

from __future__ import annotations

from typing import Any

from ferryman.engine.store import Store
from ferryman.gates.decide import Condition, PodKey
from ferryman.gates.pods import PendingIndex, PendingPods
from ferryman.resources.meta import ObjectRef

GATE = "target-health.ferryman.io/ferryman"


def raw_pod(name: str, labels: dict[str, str], gate_status: str | None = None) -> dict[str, Any]:
    conditions = [{"type": "ContainersReady", "status": "True"}]
    if gate_status is not None:
        conditions.append(
            {
                "type": GATE,
                "status": gate_status,
                "reason": "WaitingForReplicas",
                "message": "applied by 0 of 1",
                "lastTransitionTime": "2026-01-01T00:00:05Z",
            }
        )
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "labels": labels,
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {"readinessGates": [{"conditionType": GATE}]},
        "status": {"podIP": "10.0.0.1", "conditions": conditions},
    }


def service(name: str, selector: dict[str, str]) -> dict[str, Any]:
    return {
        "kind": "Service",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"selector": selector, "ports": [{"port": 80}]},
    }


def pending(store: Store, served: frozenset[str]) -> PendingPods:
    return PendingPods(
        "ferryman",
        lambda: store.objects("Pod"),
        lambda ns, name: store.get("Service", ns, name),
        lambda ns: served if ns == "ns" else frozenset(),
    )


def test_pending_pods_carry_their_condition_and_creation_time() -> None:
    store = Store()
    store.upsert(service("web", {"app": "web"}))
    store.upsert(raw_pod("web-1", {"app": "web"}, "False"))
    store.upsert(raw_pod("web-2", {"app": "web"}, "True"))  # open: not pending
    store.upsert(raw_pod("web-3", {"app": "web"}))
    found = {p.key.name: p for p in pending(store, frozenset({"web"}))()}
    assert set(found) == {"web-1", "web-3"}
    one = found["web-1"]
    assert one.key == PodKey("ns", "web-1", "uid-web-1")
    assert one.created == 1767225600.0
    assert one.served
    assert one.condition == Condition(
        "False", "WaitingForReplicas", "applied by 0 of 1", "2026-01-01T00:00:05Z"
    )
    assert found["web-3"].condition is None


def test_a_pod_no_served_service_selects_is_not_served() -> None:
    store = Store()
    store.upsert(service("web", {"app": "web"}))
    store.upsert(service("api", {"app": "api"}))
    store.upsert(raw_pod("web-1", {"app": "web"}))
    # A Service selects it, but no served Ingress routes to that Service.
    assert [p.served for p in pending(store, frozenset({"api"}))()] == [False]
    assert [p.served for p in pending(store, frozenset({"web"}))()] == [True]


def test_the_index_follows_pod_events() -> None:
    index = PendingIndex("ferryman")
    index.upsert(raw_pod("web-1", {"app": "web"}, "False"))
    index.upsert(raw_pod("web-2", {"app": "web"}))
    index.upsert(raw_pod("web-3", {"app": "web"}, "True"))
    index.upsert(service("web", {"app": "web"}))
    assert index.names() == [("ns", "web-1"), ("ns", "web-2")]
    index.upsert(raw_pod("web-1", {"app": "web"}, "True"))  # its gate opened
    index.delete(ObjectRef("Pod", "ns", "web-2"))
    assert index.names() == []


def test_a_terminating_pod_is_not_pending() -> None:
    store, index = Store(), PendingIndex("ferryman")
    pod = raw_pod("web-1", {"app": "web"}, "False")
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    store.upsert(pod)
    index.upsert(pod)
    assert index.names() == []
    assert pending(store, frozenset({"web"}))() == []
