"""Readiness gates end to end: two ferryman replicas, Kubernetes' own Deployment,
ReplicaSet and EndpointSlice controllers, and the test kubelet, which makes a pod
Ready only once its containers are ready and every readiness gate is True.

The gate opens only when every live replica's NGINX routes to the pod: a
replica held still (SIGSTOP) keeps it closed, and the pod NotReady, until it
has caught up.
"""

# The replicas fixture is testkit.gates', imported by name (pytest binds
# imported fixtures as the module's own).
# ruff: noqa: F811

from __future__ import annotations

import os
import signal
import time
from typing import Any

from lightkube import Client
from lightkube.resources.admissionregistration_v1 import MutatingWebhookConfiguration
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Event, Pod, PodStatus
from lightkube.types import PatchType

from testkit.apiserver import APIServer, apply, wait_until
from testkit.gates import (  # noqa: F401 (a fixture)
    GATE,
    TIMINGS,
    Replicas,
    leader_and_follower,
    opt_in,
    replicas,
    start_with_webhooks,
)
from testkit.harness import free_port, ingress, path, rule, served_by
from testkit.kubelet import Kubelet
from testkit.webhook import _configuration as webhook_configuration
from testkit.webhook import wait_trusted
from testkit.workloads import deployment, service

OTHER = "example.com/other"


def gated(name: str, namespace: str, version: str = "v1") -> dict[str, Any]:
    d = deployment(name, namespace, 1, version)
    d["spec"]["template"]["spec"]["readinessGates"] = [{"conditionType": GATE}]
    return d


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
    wait_until(lambda: reported(kube, ns) == {"ferryman-a", "ferryman-b"}, 60, "both report")

    # The follower is held still: it cannot apply the new pod's endpoint.
    assert follower.proc is not None
    os.kill(follower.proc.pid, signal.SIGSTOP)
    held_since = time.monotonic()
    apply(kube, gated("web", ns))
    pod = wait_until(lambda: the_pod(kube, ns, "web"), 60, "the pod")
    name = pod.metadata.name
    # The leader routes to it (ready in all but the gate), and says it waits.
    wait_until(lambda: served_by(leader, "gate.test", "/") == name, 60, "the leader routes")
    waited = next(f"ferryman-{n}" for n, f in started.items() if f is follower)
    waiting = f"applied by 1 of 2 live ferryman replicas (waiting for: {waited})"
    wait_until(
        lambda: (g := gate(kube, ns, name)) is not None and g.message == waiting,
        60,
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
    wait_until(lambda: gate(kube, ns, name).status == "True", 60, "the gate opens")
    g = gate(kube, ns, name)
    assert (g.reason, g.message) == ("Applied", "applied by all 2 live ferryman replicas")
    # The follower routes to it: it had applied it before the gate opened.
    assert served_by(follower, "gate.test", "/") == name
    wait_until(lambda: ready(kube, ns, name), 60, "the pod is Ready")
    other = conditions(kube.get(Pod, name, namespace=ns))[OTHER]
    assert (other.status, other.reason) == ("True", "Theirs")
    # The flip is counted once its patch returns: after the API shows it.
    flipped = 'ferryman_readiness_gate_flips_total{result="applied"}'
    m = wait_until(lambda: (m := leader.metrics()).get(flipped) and m, 60, "the flip counted")
    assert m[flipped] == 1
    assert m["ferryman_readiness_gate_seconds_count"] == 1
    for f in started.values():  # every replica counts pending gates, once a second
        wait_until(lambda f=f: f.metrics()["ferryman_readiness_gates_pending"] == 0, 60, "none")
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
    pod = wait_until(lambda: the_pod(kube, ns, "web"), 60, "the pod")
    name = pod.metadata.name
    wait_until(lambda: ready(kube, ns, name), 60, "the pod is Ready")
    assert gate(kube, ns, name).reason == "NotServed"
    flipped = 'ferryman_readiness_gate_flips_total{result="not_served"}'
    m = wait_until(lambda: (m := a.metrics()).get(flipped) and m, 60, "the flip counted")
    assert m[flipped] == 1


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
    wait_until(lambda: reported(kube, ns) == {"ferryman-a", "ferryman-b"}, 60, "both report")
    assert follower.proc is not None
    follower.stop(signal.SIGKILL)  # no goodbye: its Lease stays behind
    gone = "ferryman-b" if leader is started["a"] else "ferryman-a"
    dead = f"ferryman-report.ferryman-leader-election.{gone}"
    lease = kube.get(Lease, dead, namespace=ns)
    expires = _seconds(lease.spec.renewTime) + 10
    apply(kube, gated("web", ns))
    pod = wait_until(lambda: the_pod(kube, ns, "web"), 60, "the pod")
    name = pod.metadata.name
    wait_until(lambda: ready(kube, ns, name), 60, "the pod is Ready")
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
    wait_until(lambda: reported(kube, ns) == {"ferryman-a", "ferryman-b"}, 60, "both report")
    assert follower.proc is not None
    os.kill(follower.proc.pid, signal.SIGSTOP)  # never applies: only the timeout opens
    apply(kube, gated("web", ns))
    pod = wait_until(lambda: the_pod(kube, ns, "web"), 60, "the pod")
    name = pod.metadata.name
    wait_until(lambda: ready(kube, ns, name), 60, "the pod is Ready")
    g = gate(kube, ns, name)
    assert g.reason == "TimedOut"
    assert _seconds(g.lastTransitionTime) - _seconds(pod.metadata.creationTimestamp) >= 5

    def warning() -> list[Event]:
        return [
            e
            for e in kube.list(Event, namespace=ns)
            if e.reason == "ReadinessGateTimedOut" and e.involvedObject.name == name
        ]

    (event,) = wait_until(warning, 60, "a Warning Event")
    assert event.type == "Warning" and event.involvedObject.kind == "Pod"
    assert event.involvedObject.uid == pod.metadata.uid
    assert "waiting for: ferryman-" in (event.message or "")
    flipped = 'ferryman_readiness_gate_flips_total{result="timed_out"}'
    m = wait_until(lambda: (m := leader.metrics()).get(flipped) and m, 60, "the flip counted")
    assert m[flipped] == 1
    assert kubelet.errors == []


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
        wait_trusted(kube, config)
        apply(kube, deployment("web", ns, 1, "v1"))  # no gate in its template
        pod = wait_until(lambda: the_pod(kube, ns, "web"), 60, "the pod")
        assert [g.conditionType for g in pod.spec.readinessGates or []] == [GATE]
        name = pod.metadata.name
        wait_until(lambda: ready(kube, ns, name), 60, "the pod is Ready")
        g = gate(kube, ns, name)
        assert (g.reason, g.message) == ("Applied", "applied by all 2 live ferryman replicas")
        for f in replicas.started.values():
            assert served_by(f, "gate.test", "/") == name
    finally:
        kube.delete(MutatingWebhookConfiguration, config)
    assert kubelet.errors == []
