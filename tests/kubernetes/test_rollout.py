"""A real rollout: Kubernetes' own controllers and the test kubelet move the pods, ferryman follows.

Deployment -> ReplicaSet -> Pods -> EndpointSlices are all worked out by
kube-controller-manager's code (tools/testapiserver --controllers); the pods
are real processes (tests/kubernetes/kubelet.py) answering with their names.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Service
from lightkube.types import PatchType

from tests.integration.harness import Ferryman, ingress, path, rule, served_by
from tests.kubernetes.apiserver import APIServer, apply, wait_until
from tests.kubernetes.kubelet import Kubelet
from tests.kubernetes.workloads import deployment, live_pods, rolled_out, service


def answering(f: Ferryman, host: str, n: int = 12) -> set[str | None]:
    return {served_by(f, host, f"/r{i}") for i in range(n)}


def only(f: Ferryman, host: str, pods: set[str], n: int) -> bool:
    """Whether n requests are answered by exactly ``pods``."""
    return answering(f, host, n) == pods


@pytest.fixture
def ferryman(tmp_path: Path, cluster: APIServer, cluster_namespace: str) -> Iterator[Ferryman]:
    f = Ferryman(
        tmp_path / "ferryman",
        extra_args=["--watch-namespace", cluster_namespace],
        kubeconfig=cluster.kubeconfig,
        env={"POD_NAME": "ferryman-rollout"},
    )
    yield f
    if f.proc is not None:
        f.stop()


def test_ferryman_follows_a_deployment_rollout(
    cluster: APIServer, kubelet: Kubelet, cluster_namespace: str, ferryman: Ferryman
) -> None:
    kube, ns = cluster.client(), cluster_namespace
    apply(kube, deployment("web", ns, 2, "v1"), service("web", ns))
    apply(kube, ingress("web", [rule("roll.test", path("/", "web"))], namespace=ns))
    wait_until(lambda: rolled_out(kube, ns, "web", 2), 30, "first rollout")
    first = live_pods(kube, ns)
    assert len(first) == 2 and all(p.startswith("web-") for p in first)
    ferryman.start()
    wait_until(lambda: only(ferryman, "roll.test", first, 12), 10, "both pods serve")

    # Scale out: the ReplicaSet controller adds a pod, the kubelet runs it.
    kube.patch(
        Deployment, "web", {"spec": {"replicas": 3}}, namespace=ns, patch_type=PatchType.MERGE
    )
    wait_until(lambda: rolled_out(kube, ns, "web", 3), 30, "scale-out")
    scaled = live_pods(kube, ns)
    assert first < scaled
    wait_until(lambda: only(ferryman, "roll.test", scaled, 18), 10, "three pods serve")

    # A new pod template: the Deployment controller replaces every pod.
    apply(kube, deployment("web", ns, 3, "v2"))
    wait_until(lambda: rolled_out(kube, ns, "web", 3), 60, "second rollout")
    wait_until(lambda: len(live_pods(kube, ns)) == 3, 20, "old pods gone")
    second = live_pods(kube, ns)
    assert not second & scaled
    wait_until(lambda: only(ferryman, "roll.test", second, 18), 20, "only new pods serve")
    assert kubelet.errors == []


def test_ferryman_follows_a_service_selector_change(
    cluster: APIServer, kubelet: Kubelet, cluster_namespace: str, ferryman: Ferryman
) -> None:
    """Blue/green: the endpointslice controller moves the Service, ferryman follows."""
    kube, ns = cluster.client(), cluster_namespace
    apply(kube, deployment("blue", ns, 1, "v1"), deployment("green", ns, 1, "v1"))
    apply(
        kube, service("web", ns), ingress("web", [rule("bg.test", path("/", "web"))], namespace=ns)
    )
    kube.patch(
        Service,
        "web",
        {"spec": {"selector": {"app": "blue"}}},
        namespace=ns,
        patch_type=PatchType.MERGE,
    )
    for name in ("blue", "green"):
        wait_until(lambda name=name: rolled_out(kube, ns, name, 1), 30, name)
    pods = live_pods(kube, ns)
    blue = {p for p in pods if p.startswith("blue-")}
    green = pods - blue
    ferryman.start()
    wait_until(lambda: only(ferryman, "bg.test", blue, 4), 10, "blue serves")
    kube.patch(
        Service,
        "web",
        {"spec": {"selector": {"app": "green"}}},
        namespace=ns,
        patch_type=PatchType.MERGE,
    )
    wait_until(lambda: only(ferryman, "bg.test", green, 4), 10, "green serves")
    assert kubelet.errors == []
