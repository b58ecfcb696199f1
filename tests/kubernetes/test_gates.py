"""Readiness gates end to end: two ferryman replicas, Kubernetes' own Deployment,
ReplicaSet and EndpointSlice controllers, and the test kubelet, which makes a pod
Ready only once its containers are ready and every readiness gate is True.

The gate opens only when every live replica's NGINX routes to the pod: a
replica held still (SIGSTOP) keeps it closed, and the pod NotReady, until it
has caught up.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Namespace, Pod, PodStatus
from lightkube.types import PatchType

from tests.integration.harness import Ferryman, ingress, path, rule, served_by
from tests.kubernetes.apiserver import APIServer, apply, wait_until
from tests.kubernetes.kubelet import Kubelet
from tests.kubernetes.test_rollout import deployment, service

GATE = "target-health.ferryman.io/ferryman"
OTHER = "example.com/other"
# The replicas' Leases (leadership and reports) last long enough that a replica
# held still for the test's few seconds stays live; renewals come every second.
TIMINGS = [
    "--leader-election-lease-duration", "20",
    "--leader-election-renew-deadline", "15",
    "--leader-election-retry-period", "1",
]  # fmt: skip


def gated(name: str, namespace: str, version: str = "v1") -> dict[str, Any]:
    d = deployment(name, namespace, 1, version)
    d["spec"]["template"]["spec"]["readinessGates"] = [{"conditionType": GATE}]
    return d


def opt_in(kube: Client, namespace: str) -> None:
    kube.patch(
        Namespace,
        namespace,
        {"metadata": {"labels": {"ferryman.io/pod-readiness-gate-inject": "enabled"}}},
        patch_type=PatchType.MERGE,
    )


def the_pod(kube: Client, namespace: str, prefix: str) -> Pod | None:
    pods = [
        p
        for p in kube.list(Pod, namespace=namespace)
        if p.metadata.name.startswith(prefix + "-") and not p.metadata.deletionTimestamp
    ]
    return pods[0] if len(pods) == 1 else None


def conditions(p: Pod) -> dict[str, Any]:
    return {c.type: c for c in (p.status.conditions if p.status else None) or []}


def gate(kube: Client, namespace: str, name: str) -> Any:
    return conditions(kube.get(Pod, name, namespace=namespace)).get(GATE)


def ready(kube: Client, namespace: str, name: str) -> bool:
    c = conditions(kube.get(Pod, name, namespace=namespace)).get("Ready")
    return c is not None and c.status == "True"


@pytest.fixture
def replicas(
    tmp_path: Path, cluster: APIServer, cluster_namespace: str
) -> Iterator[dict[str, Ferryman]]:
    args = [
        "--watch-namespace", cluster_namespace,
        "--readiness-gates",
        "--leader-election-namespace", cluster_namespace,
        *TIMINGS,
    ]  # fmt: skip
    started = {
        name: Ferryman(
            tmp_path / name,
            extra_args=args,
            kubeconfig=cluster.kubeconfig,
            env={"POD_NAME": f"ferryman-{name}"},
        )
        for name in ("a", "b")
    }
    yield started
    for f in started.values():
        if f.proc is not None:
            os.kill(f.proc.pid, signal.SIGCONT)
            f.stop()


def leader_and_follower(
    kube: Client, namespace: str, replicas: dict[str, Ferryman]
) -> tuple[Ferryman, Ferryman]:
    def holder() -> str | None:
        lease = kube.get(Lease, "ferryman-leader-election", namespace=namespace)
        return lease.spec.holderIdentity if lease.spec else None

    name = wait_until(holder, 20, "a leader").removeprefix("ferryman-")
    (other,) = set(replicas) - {name}
    return replicas[name], replicas[other]


def reported(kube: Client, namespace: str) -> set[str]:
    leases = kube.list(
        Lease, namespace=namespace, labels={"gates.ferryman.io/ingress-class": "ferryman"}
    )
    return {lease.spec.holderIdentity for lease in leases if lease.spec}


def test_the_gate_opens_only_once_every_replica_applied_the_pod(
    cluster: APIServer, kubelet: Kubelet, cluster_namespace: str,
    replicas: dict[str, Ferryman],
) -> None:  # fmt: skip
    kube, ns = cluster.client(), cluster_namespace
    opt_in(kube, ns)
    apply(
        kube,
        service("web", ns),
        ingress("web", [rule("gate.test", path("/", "web"))], namespace=ns),
    )
    for f in replicas.values():
        f.start()
    leader, follower = leader_and_follower(kube, ns, replicas)
    wait_until(lambda: reported(kube, ns) == {"ferryman-a", "ferryman-b"}, 10, "both report")

    # The follower is held still: it cannot apply the new pod's endpoint.
    assert follower.proc is not None
    os.kill(follower.proc.pid, signal.SIGSTOP)
    held_since = time.monotonic()
    apply(kube, gated("web", ns))
    pod = wait_until(lambda: the_pod(kube, ns, "web"), 20, "the pod")
    name = pod.metadata.name
    # The leader routes to it (ready in all but the gate), and says it waits.
    wait_until(lambda: served_by(leader, "gate.test", "/") == name, 15, "the leader routes")
    wait_until(
        lambda: (g := gate(kube, ns, name)) is not None and g.reason == "WaitingForReplicas",
        5,
        "the gate says it waits",
    )
    g = gate(kube, ns, name)
    assert g.status == "False"
    assert (
        g.message
        == "applied by 1 of 2 live ferryman replicas (waiting for: ferryman-"
        + ("b" if leader is replicas["a"] else "a")
        + ")"
    )
    # Someone else's condition on the same pod.
    kube.patch(
        PodStatus,
        name,
        {"status": {"conditions": [{"type": OTHER, "status": "True", "reason": "Theirs"}]}},
        namespace=ns,
        patch_type=PatchType.STRATEGIC,
    )
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        assert gate(kube, ns, name).status == "False"
        assert not ready(kube, ns, name)
        time.sleep(0.1)
    assert time.monotonic() - held_since < 18  # the follower's Lease never expired

    os.kill(follower.proc.pid, signal.SIGCONT)
    wait_until(lambda: gate(kube, ns, name).status == "True", 10, "the gate opens")
    g = gate(kube, ns, name)
    assert (g.reason, g.message) == ("Applied", "applied by all 2 live ferryman replicas")
    # The follower routes to it: it had applied it before the gate opened.
    assert served_by(follower, "gate.test", "/") == name
    wait_until(lambda: ready(kube, ns, name), 10, "the pod is Ready")
    other = conditions(kube.get(Pod, name, namespace=ns))[OTHER]
    assert (other.status, other.reason) == ("True", "Theirs")
    m = leader.metrics()
    assert m['ferryman_readiness_gate_flips_total{result="applied"}'] == 1
    assert m["ferryman_readiness_gate_seconds_count"] == 1
    for f in replicas.values():  # every replica counts pending gates, once a second
        wait_until(lambda f=f: f.metrics()["ferryman_readiness_gates_pending"] == 0, 5, "none")
    assert follower.metrics().get('ferryman_readiness_gate_flips_total{result="applied"}', 0) == 0
    assert kubelet.errors == []


def test_a_pod_no_served_service_selects_is_not_held_back(
    cluster: APIServer, kubelet: Kubelet, cluster_namespace: str,
    replicas: dict[str, Ferryman],
) -> None:  # fmt: skip
    kube, ns = cluster.client(), cluster_namespace
    opt_in(kube, ns)
    apply(kube, service("web", ns))  # no Ingress routes to it
    replicas["a"].start()
    apply(kube, gated("web", ns))
    pod = wait_until(lambda: the_pod(kube, ns, "web"), 20, "the pod")
    name = pod.metadata.name
    wait_until(lambda: ready(kube, ns, name), 15, "the pod is Ready")
    assert gate(kube, ns, name).reason == "NotServed"
    m = replicas["a"].metrics()
    assert m['ferryman_readiness_gate_flips_total{result="not_served"}'] == 1
