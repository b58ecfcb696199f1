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
from lightkube.resources.admissionregistration_v1 import MutatingWebhookConfiguration
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Event, Namespace, Pod, PodStatus
from lightkube.types import PatchType

from testkit.apiserver import APIServer, apply, wait_until
from testkit.harness import Ferryman, free_port, ingress, path, rule, served_by
from testkit.kubelet import Kubelet
from tests.kubernetes.test_rollout import deployment, service
from tests.kubernetes.test_webhook import _configuration as webhook_configuration

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


class Replicas:
    """ferryman replicas in Kubernetes mode with --readiness-gates, in the test's namespace."""

    def __init__(self, tmp_path: Path, cluster: APIServer, namespace: str) -> None:
        self._tmp, self._cluster, self._namespace = tmp_path, cluster, namespace
        self.started: dict[str, Ferryman] = {}

    def start(self, names: tuple[str, ...], *extra: str) -> dict[str, Ferryman]:
        for name in names:
            f = Ferryman(
                self._tmp / name,
                extra_args=[
                    "--watch-namespace", self._namespace,
                    "--readiness-gates",
                    "--leader-election-namespace", self._namespace,
                    *(extra or TIMINGS),
                ],
                kubeconfig=self._cluster.kubeconfig,
                env={"POD_NAME": f"ferryman-{name}"},
            )  # fmt: skip
            self.started[name] = f
            f.start()
        return self.started

    def stop(self) -> None:
        for f in self.started.values():
            if f.proc is not None and f.proc.poll() is None:
                os.kill(f.proc.pid, signal.SIGCONT)
            if f.proc is not None:
                f.stop()


@pytest.fixture
def replicas(tmp_path: Path, cluster: APIServer, cluster_namespace: str) -> Iterator[Replicas]:
    r = Replicas(tmp_path, cluster, cluster_namespace)
    yield r
    r.stop()


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
    replicas: Replicas,
) -> None:  # fmt: skip
    kube, ns = cluster.client(), cluster_namespace
    opt_in(kube, ns)
    routes = ingress("web", [rule("gate.test", path("/", "web"))], namespace=ns)
    apply(kube, service("web", ns), routes)
    started = replicas.start(("a", "b"))
    leader, follower = leader_and_follower(kube, ns, started)
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
    waited = next(f"ferryman-{n}" for n, f in started.items() if f is follower)
    waiting = f"applied by 1 of 2 live ferryman replicas (waiting for: {waited})"
    wait_until(
        lambda: (g := gate(kube, ns, name)) is not None and g.message == waiting,
        5,
        "the gate says it waits for the follower",
    )
    g = gate(kube, ns, name)
    assert (g.status, g.reason) == ("False", "WaitingForReplicas")
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
    for f in started.values():  # every replica counts pending gates, once a second
        wait_until(lambda f=f: f.metrics()["ferryman_readiness_gates_pending"] == 0, 5, "none")
    assert follower.metrics().get('ferryman_readiness_gate_flips_total{result="applied"}', 0) == 0
    assert kubelet.errors == []


def test_a_pod_no_served_service_selects_is_not_held_back(
    cluster: APIServer, kubelet: Kubelet, cluster_namespace: str,
    replicas: Replicas,
) -> None:  # fmt: skip
    kube, ns = cluster.client(), cluster_namespace
    opt_in(kube, ns)
    apply(kube, service("web", ns))  # no Ingress routes to it
    a = replicas.start(("a",))["a"]
    apply(kube, gated("web", ns))
    pod = wait_until(lambda: the_pod(kube, ns, "web"), 20, "the pod")
    name = pod.metadata.name
    wait_until(lambda: ready(kube, ns, name), 15, "the pod is Ready")
    assert gate(kube, ns, name).reason == "NotServed"
    m = a.metrics()
    assert m['ferryman_readiness_gate_flips_total{result="not_served"}'] == 1


def _seconds(t: Any) -> float:
    return float(t.timestamp())


def test_a_dead_replica_holds_gates_back_only_until_its_report_expires(
    cluster: APIServer, kubelet: Kubelet, cluster_namespace: str, replicas: Replicas
) -> None:
    kube, ns = cluster.client(), cluster_namespace
    opt_in(kube, ns)
    routes = ingress("web", [rule("gate.test", path("/", "web"))], namespace=ns)
    apply(kube, service("web", ns), routes)
    timings = ["--leader-election-lease-duration", "10", "--leader-election-renew-deadline", "8"]
    started = replicas.start(("a", "b"), *timings, "--leader-election-retry-period", "1")
    leader, follower = leader_and_follower(kube, ns, started)
    wait_until(lambda: reported(kube, ns) == {"ferryman-a", "ferryman-b"}, 10, "both report")
    assert follower.proc is not None
    follower.stop(signal.SIGKILL)  # no goodbye: its Lease stays behind
    gone = "ferryman-b" if leader is started["a"] else "ferryman-a"
    dead = f"ferryman-report.ferryman-leader-election.{gone}"
    lease = kube.get(Lease, dead, namespace=ns)
    expires = _seconds(lease.spec.renewTime) + 10
    apply(kube, gated("web", ns))
    pod = wait_until(lambda: the_pod(kube, ns, "web"), 20, "the pod")
    name = pod.metadata.name
    wait_until(lambda: ready(kube, ns, name), 30, "the pod is Ready")
    g = gate(kube, ns, name)
    assert (g.reason, g.message) == ("Applied", "applied by all 1 live ferryman replicas")
    # Not before the dead replica's report expired (the API keeps whole seconds).
    assert _seconds(g.lastTransitionTime) >= int(expires)
    assert kubelet.errors == []


def test_the_timeout_opens_the_gate_with_a_warning_event(
    cluster: APIServer, kubelet: Kubelet, cluster_namespace: str, replicas: Replicas
) -> None:
    kube, ns = cluster.client(), cluster_namespace
    opt_in(kube, ns)
    routes = ingress("web", [rule("gate.test", path("/", "web"))], namespace=ns)
    apply(kube, service("web", ns), routes)
    started = replicas.start(("a", "b"), *TIMINGS, "--readiness-gate-timeout", "5")
    leader, follower = leader_and_follower(kube, ns, started)
    wait_until(lambda: reported(kube, ns) == {"ferryman-a", "ferryman-b"}, 10, "both report")
    assert follower.proc is not None
    os.kill(follower.proc.pid, signal.SIGSTOP)  # never applies: only the timeout opens
    apply(kube, gated("web", ns))
    pod = wait_until(lambda: the_pod(kube, ns, "web"), 20, "the pod")
    name = pod.metadata.name
    wait_until(lambda: ready(kube, ns, name), 15, "the pod is Ready")
    g = gate(kube, ns, name)
    assert g.reason == "TimedOut"
    assert _seconds(g.lastTransitionTime) - _seconds(pod.metadata.creationTimestamp) >= 5

    def warning() -> list[Event]:
        return [
            e
            for e in kube.list(Event, namespace=ns)
            if e.reason == "ReadinessGateTimedOut" and e.involvedObject.name == name
        ]

    (event,) = wait_until(warning, 5, "a Warning Event")
    assert event.type == "Warning" and event.involvedObject.kind == "Pod"
    assert event.involvedObject.uid == pod.metadata.uid
    assert "waiting for: ferryman-" in (event.message or "")
    m = leader.metrics()
    assert m['ferryman_readiness_gate_flips_total{result="timed_out"}'] == 1
    assert kubelet.errors == []


def start_with_webhooks(
    replicas: Replicas, ns: str, config: str, ports: dict[str, int], timings: list[str]
) -> None:
    """One replica per ``ports`` entry, each serving the readiness gate webhook
    of ``config`` on its port with the namespace's certificate Secret."""
    for name, port in ports.items():
        replicas.start(
            (name,), *timings,
            "--readiness-gate-webhook-port", str(port),
            "--readiness-gate-webhook-cert-secret", f"{ns}/webhook-cert",
            "--readiness-gate-webhook-cert-hosts", "127.0.0.1",
            "--readiness-gate-webhook-configuration", config,
        )  # fmt: skip


def test_the_gate_the_webhook_injects_is_opened_once_both_replicas_route(
    cluster: APIServer, kubelet: Kubelet, cluster_namespace: str, replicas: Replicas
) -> None:
    """The whole feature: a Deployment says nothing of gates; the webhook adds
    ferryman's to its pod, both replicas route to it, the leader opens it."""
    kube, ns = cluster.client(), cluster_namespace
    opt_in(kube, ns)
    routes = ingress("web", [rule("gate.test", path("/", "web"))], namespace=ns)
    apply(kube, service("web", ns), routes)
    config, ports = f"gates-{ns}", {"a": free_port(), "b": free_port()}
    apply(kube, webhook_configuration(config, ns, ports["a"]))
    try:
        start_with_webhooks(replicas, ns, config, ports, TIMINGS)
        wait_until(
            lambda: all(w.clientConfig.caBundle for w in kube.get(
                MutatingWebhookConfiguration, config).webhooks or []),
            10,
            "the webhook trusted",
        )  # fmt: skip
        apply(kube, deployment("web", ns, 1, "v1"))  # no gate in its template
        pod = wait_until(lambda: the_pod(kube, ns, "web"), 20, "the pod")
        assert [g.conditionType for g in pod.spec.readinessGates or []] == [GATE]
        name = pod.metadata.name
        wait_until(lambda: ready(kube, ns, name), 20, "the pod is Ready")
        g = gate(kube, ns, name)
        assert (g.reason, g.message) == ("Applied", "applied by all 2 live ferryman replicas")
        for f in replicas.started.values():
            assert served_by(f, "gate.test", "/") == name
    finally:
        kube.delete(MutatingWebhookConfiguration, config)
    assert kubelet.errors == []
