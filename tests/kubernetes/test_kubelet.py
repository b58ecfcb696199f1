"""The test kubelet against the real apiserver and controllers: binding, status, gates, deletion."""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

from lightkube import Client
from lightkube.resources.core_v1 import Pod
from lightkube.resources.discovery_v1 import EndpointSlice
from lightkube.types import PatchType

from testkit.apiserver import APIServer, apply, wait_until
from testkit.kubelet import Kubelet


def pod(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    env = spec.pop("env", {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {
            "containers": [
                {
                    "name": "echo",
                    "image": "echo",
                    "ports": [{"containerPort": 8080}],
                    "env": [{"name": k, "value": v} for k, v in env.items()],
                }
            ],
            **spec,
        },
    }


def answered_by(ip: str, port: int = 8080) -> str:
    with urllib.request.urlopen(f"http://{ip}:{port}/", timeout=2) as r:
        return str(json.load(r)["name"])


def conditions(p: Pod) -> dict[str, str]:
    return {c.type: c.status for c in (p.status.conditions or [])} if p.status else {}


def ready(kube: Client, name: str, namespace: str) -> Pod | None:
    p = kube.get(Pod, name, namespace=namespace)
    return p if conditions(p).get("Ready") == "True" else None


def test_a_pod_is_bound_run_and_reported_ready(
    cluster: APIServer, kubelet: Kubelet, cluster_namespace: str
) -> None:
    kube = cluster.client()
    apply(kube, pod("web", cluster_namespace))
    p = wait_until(lambda: ready(kube, "web", cluster_namespace), 60, "pod Ready")
    assert p.spec.nodeName == kubelet.node
    assert p.status.phase == "Running"
    assert p.status.hostIP == kubelet.node_address
    assert [i.ip for i in p.status.podIPs] == [p.status.podIP]
    assert not p.status.podIP.startswith("127.")
    assert conditions(p) == {
        "PodScheduled": "True", "Initialized": "True", "ContainersReady": "True", "Ready": "True",
    }  # fmt: skip
    (cs,) = p.status.containerStatuses
    assert (cs.name, cs.ready, cs.started) == ("echo", True, True)
    assert answered_by(p.status.podIP) == "web"  # a real process, on the pod's own address
    # Settled: no stale reason from the not-ready phase, and no rewrites.
    assert {c.type: c.reason for c in p.status.conditions}["Ready"] is None
    time.sleep(2)
    assert kube.get(Pod, "web", namespace=cluster_namespace).metadata.resourceVersion == (
        p.metadata.resourceVersion
    )
    assert kubelet.errors == []


def _slice_endpoints(kube: Client, namespace: str, service: str) -> dict[str, bool]:
    out: dict[str, bool] = {}
    for s in kube.list(
        EndpointSlice, namespace=namespace, labels={"kubernetes.io/service-name": service}
    ):
        for e in s.endpoints or []:
            out[e.targetRef.name] = bool(e.conditions and e.conditions.ready)
    return out


def test_a_readiness_gate_holds_ready_and_the_endpoint_until_it_is_true(
    cluster: APIServer, kubelet: Kubelet, cluster_namespace: str
) -> None:
    kube = cluster.client()
    gate = "example.com/lb-ready"
    apply(
        kube,
        pod("gated", cluster_namespace, readinessGates=[{"conditionType": gate}]),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "gated", "namespace": cluster_namespace},
            "spec": {"selector": {"app": "gated"}, "ports": [{"port": 80, "targetPort": 8080}]},
        },
    )

    def containers_ready() -> bool:
        p = kube.get(Pod, "gated", namespace=cluster_namespace)
        return conditions(p).get("ContainersReady") == "True"

    wait_until(containers_ready, 60, "containers ready")
    # The real endpointslice controller lists it, but not as ready.
    wait_until(
        lambda: _slice_endpoints(kube, cluster_namespace, "gated") == {"gated": False}, 60, "slice"
    )
    time.sleep(0.5)
    p = kube.get(Pod, "gated", namespace=cluster_namespace)
    assert conditions(p)["Ready"] == "False"
    ready_condition = next(c for c in p.status.conditions if c.type == "Ready")
    assert ready_condition.reason == "ReadinessGatesNotReady"

    kube.patch(
        Pod.Status, "gated",
        {"status": {"conditions": [{"type": gate, "status": "True"}]}},
        namespace=cluster_namespace, patch_type=PatchType.STRATEGIC,
    )  # fmt: skip
    wait_until(lambda: ready(kube, "gated", cluster_namespace), 60, "Ready after the gate")
    wait_until(
        lambda: _slice_endpoints(kube, cluster_namespace, "gated") == {"gated": True},
        60,
        "ready endpoint",
    )

    # Back to False: Ready follows again.
    kube.patch(
        Pod.Status, "gated",
        {"status": {"conditions": [{"type": gate, "status": "False"}]}},
        namespace=cluster_namespace, patch_type=PatchType.STRATEGIC,
    )  # fmt: skip
    wait_until(
        lambda: _slice_endpoints(kube, cluster_namespace, "gated") == {"gated": False},
        60,
        "unready",
    )
    assert kubelet.errors == []


def test_deletion_sends_sigterm_and_waits_for_the_grace_period(
    cluster: APIServer, kubelet: Kubelet, cluster_namespace: str
) -> None:
    kube = cluster.client()
    # Drains for 1 s after SIGTERM (within its grace period) ...
    apply(
        kube,
        pod("drains", cluster_namespace, env={"TERM_DELAY": "1"}, terminationGracePeriodSeconds=10),
    )
    # ... or ignores it for longer than its grace period.
    apply(
        kube,
        pod("stuck", cluster_namespace, env={"TERM_DELAY": "60"}, terminationGracePeriodSeconds=2),
    )
    # ... or has a preStop sleep, and then stops at once on SIGTERM.
    hooked = pod("hooked", cluster_namespace, terminationGracePeriodSeconds=10)
    hooked["spec"]["containers"][0]["lifecycle"] = {"preStop": {"sleep": {"seconds": 1}}}
    apply(kube, hooked)
    names = ("drains", "stuck", "hooked")
    ips = {
        n: wait_until(lambda n=n: ready(kube, n, cluster_namespace), 60, n).status.podIP
        for n in names
    }
    start = time.monotonic()
    for n in names:
        kube.delete(Pod, n, namespace=cluster_namespace)
    # Still there and still serving while they terminate.
    assert kube.get(Pod, "stuck", namespace=cluster_namespace).metadata.deletionTimestamp
    assert {answered_by(ips[n]) for n in names} == set(names)

    def gone(name: str) -> bool:
        return not any(p.metadata.name == name for p in kube.list(Pod, namespace=cluster_namespace))

    wait_until(lambda: gone("drains"), 60, "drains deleted")
    drained = time.monotonic() - start
    wait_until(lambda: gone("hooked"), 60, "hooked deleted")
    hook_slept = time.monotonic() - start
    wait_until(lambda: gone("stuck"), 60, "stuck deleted")
    killed = time.monotonic() - start
    assert 0.9 < drained < 8, drained  # when the process exited, not the 10 s grace period
    assert 0.9 < hook_slept < 8, hook_slept  # after its preStop sleep
    assert 1.9 < killed < 8, killed  # killed at the end of its 2 s grace period
    assert kubelet.errors == []


def test_a_readiness_probe_decides_when_containers_are_ready(
    cluster: APIServer, kubelet: Kubelet, cluster_namespace: str
) -> None:
    kube, ns = cluster.client(), cluster_namespace

    def probed(name: str, probe: dict[str, Any], **env: str) -> dict[str, Any]:
        p = pod(name, ns, env=env)
        p["spec"]["containers"][0]["readinessProbe"] = {"periodSeconds": 1, **probe}
        return p

    started = time.monotonic()
    apply(
        kube,
        # Loads for 1.5 s before it listens: ready only after a probe got through.
        probed("loads", {"httpGet": {"path": "/healthz", "port": 8080}}, START_DELAY="1.5"),
        probed("tcp", {"tcpSocket": {"port": 8080}}),
        # Serves, but its probe times out, or knocks on a port nothing listens on.
        probed("slow", {"httpGet": {"path": "/?delay=3", "port": 8080}, "timeoutSeconds": 1}),
        probed("closed", {"tcpSocket": {"port": 9090}}),
    )
    wait_until(lambda: ready(kube, "loads", ns), 60, "loads Ready")
    assert time.monotonic() - started > 1.5
    wait_until(lambda: ready(kube, "tcp", ns), 60, "tcp Ready")
    for name in ("slow", "closed"):
        p = kube.get(Pod, name, namespace=ns)
        assert answered_by(p.status.podIP) == name  # the process runs and answers
        assert conditions(p)["ContainersReady"] == "False"
        assert conditions(p)["Ready"] == "False"
    assert kubelet.errors == []


def test_a_pods_log_is_read_through_the_api_server(
    cluster: APIServer, kubelet: Kubelet, cluster_namespace: str
) -> None:
    """pods/log: the API server proxies to the kubelet's HTTPS endpoint."""
    kube = cluster.client()
    apply(kube, pod("logged", cluster_namespace))
    p = wait_until(lambda: ready(kube, "logged", cluster_namespace), 60, "pod Ready")
    answered_by(p.status.podIP)
    assert "ready" in next(iter(kube.log("logged", namespace=cluster_namespace)))
    stamped = list(kube.log("logged", namespace=cluster_namespace, timestamps=True))
    assert stamped[0].split(" ", 1)[1].strip() == "ready"
    assert len(list(kube.log("logged", namespace=cluster_namespace, tail_lines=1))) == 1
    time.sleep(1.5)  # since= filters by the lines' times, as a kubelet does
    assert list(kube.log("logged", namespace=cluster_namespace, since=1)) == []
    assert kubelet.errors == []
