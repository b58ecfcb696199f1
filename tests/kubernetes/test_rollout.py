"""A real rollout: Kubernetes' own controllers and the test kubelet move the pods, ferryman follows.

Deployment -> ReplicaSet -> Pods -> EndpointSlices are all worked out by
kube-controller-manager's code (tools/testapiserver --controllers); the pods
are real processes (testkit/kubelet.py) answering with their names.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Service
from lightkube.resources.discovery_v1 import EndpointSlice
from lightkube.types import PatchType

from ferryman.resources.service import SERVICE_NAME_LABEL
from testkit.apiserver import APIServer, apply, wait_until
from testkit.connections import NewConnections
from testkit.harness import Ferryman, ingress, path, rule, served_by
from testkit.kubelet import Kubelet
from testkit.workloads import deployment, live_pods, rolled_out, service


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
    wait_until(lambda: rolled_out(kube, ns, "web", 2), 60, "first rollout")
    first = live_pods(kube, ns)
    assert len(first) == 2 and all(p.startswith("web-") for p in first)
    ferryman.start()
    wait_until(lambda: only(ferryman, "roll.test", first, 12), 60, "both pods serve")

    # Scale out: the ReplicaSet controller adds a pod, the kubelet runs it.
    kube.patch(
        Deployment, "web", {"spec": {"replicas": 3}}, namespace=ns, patch_type=PatchType.MERGE
    )
    wait_until(lambda: rolled_out(kube, ns, "web", 3), 60, "scale-out")
    scaled = live_pods(kube, ns)
    assert first < scaled
    wait_until(lambda: only(ferryman, "roll.test", scaled, 18), 60, "three pods serve")

    # A new pod template: the Deployment controller replaces every pod.
    apply(kube, deployment("web", ns, 3, "v2"))
    wait_until(lambda: rolled_out(kube, ns, "web", 3), 60, "second rollout")
    wait_until(lambda: len(live_pods(kube, ns)) == 3, 60, "old pods gone")
    second = live_pods(kube, ns)
    assert not second & scaled
    wait_until(lambda: only(ferryman, "roll.test", second, 18), 60, "only new pods serve")
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
        wait_until(lambda name=name: rolled_out(kube, ns, name, 1), 60, name)
    pods = live_pods(kube, ns)
    blue = {p for p in pods if p.startswith("blue-")}
    green = pods - blue
    ferryman.start()
    wait_until(lambda: only(ferryman, "bg.test", blue, 4), 60, "blue serves")
    kube.patch(
        Service,
        "web",
        {"spec": {"selector": {"app": "green"}}},
        namespace=ns,
        patch_type=PatchType.MERGE,
    )
    wait_until(lambda: only(ferryman, "bg.test", green, 4), 60, "green serves")
    assert kubelet.errors == []


def test_the_last_pod_serves_while_it_terminates(
    cluster: APIServer, kubelet: Kubelet, cluster_namespace: str, ferryman: Ferryman
) -> None:
    """Scaled to 0, the EndpointSlice controller marks the pod's endpoint ready=false,
    serving=true, terminating=true while it drains; with no ready endpoint left,
    ferryman routes to it (as kube-proxy does) rather than answering 503, and stops
    once it has gone."""
    kube, ns = cluster.client(), cluster_namespace
    app = deployment("last", ns, 1, "v1")
    container = app["spec"]["template"]["spec"]["containers"][0]
    container["env"] = [e for e in container["env"] if e["name"] != "TERM_DELAY"]
    container["env"].append({"name": "TERM_DELAY", "value": "4"})
    apply(kube, app, service("last", ns))
    apply(kube, ingress("last", [rule("last.test", path("/", "last"))], namespace=ns))
    wait_until(lambda: rolled_out(kube, ns, "last", 1), 60, "rolled out")
    (pod,) = live_pods(kube, ns)
    ferryman.start()
    wait_until(lambda: only(ferryman, "last.test", {pod}, 3), 60, "the pod serves")

    kube.patch(
        Deployment, "last", {"spec": {"replicas": 0}}, namespace=ns, patch_type=PatchType.MERGE
    )

    def draining() -> bool:
        slices = kube.list(EndpointSlice, namespace=ns, labels={SERVICE_NAME_LABEL: "last"})
        conditions = [e.conditions for s in slices for e in s.endpoints or []]
        return any(c and c.terminating and c.serving and not c.ready for c in conditions)

    wait_until(draining, 60, "the endpoint serving while terminating")
    assert answering(ferryman, "last.test", 6) == {pod}
    wait_until(lambda: ferryman.get("last.test", "/").status == 503, 60, "503 once gone")


def test_a_replica_told_to_stop_serves_through_its_grace_period(
    cluster: APIServer, kubelet: Kubelet, cluster_namespace: str, ferryman: Ferryman
) -> None:
    """Kubernetes mode, as deploy/ runs it: on SIGTERM readiness fails at once while
    every new connection is still answered for --shutdown-grace-period, then it
    exits 0."""
    kube, ns = cluster.client(), cluster_namespace
    apply(kube, deployment("stay", ns, 1, "v1"), service("stay", ns))
    apply(kube, ingress("stay", [rule("stay.test", path("/", "stay"))], namespace=ns))
    wait_until(lambda: rolled_out(kube, ns, "stay", 1), 60, "rolled out")
    (pod,) = live_pods(kube, ns)
    grace = 3.0
    ferryman.extra_args += ["--shutdown-grace-period", str(grace)]
    ferryman.start()
    assert ferryman.proc is not None
    wait_until(lambda: only(ferryman, "stay.test", {pod}, 3), 60, "the pod serves")
    load = NewConnections(ferryman.http_port, "stay.test")
    try:
        wait_until(lambda: any(o == pod for _, o in load.outcomes), 60, "load answered")
        signalled = time.monotonic()
        ferryman.proc.send_signal(signal.SIGTERM)
        ready = httpx.get(f"http://127.0.0.1:{ferryman.ready_port}/nginx-ready", timeout=5)
        code = ferryman.proc.wait(grace + 20)
    finally:
        outcomes = load.stop()
    after = signalled - load.t0
    during = [o for t, o in outcomes if after <= t < after + grace - 0.5]
    assert ready.status_code == 503
    assert during and set(during) == {pod}, sorted(set(during))
    assert code == 0, ferryman.logs()
