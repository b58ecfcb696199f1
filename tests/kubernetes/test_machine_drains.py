"""ferryman as a Machine deletion hook owner (--machine-lifecycle-hooks), on a real cluster.

The Machine API's part is played by `ferryman machine-controller` (its webhook
and finalizer, cordon, the Eviction API, instance and Node deletion), the Nodes
by test kubelets running real backends. Two ferryman replicas run as processes,
each told its Node (NODE_NAME): one on the Machine's Node, one on the shared
Node. What is asserted is what a user sees: the Machine's hooks, conditions and
Events in order, the replicas' readiness, where requests go, and requests in
flight finishing before the drain goes on.
"""

# The Machine API fixtures are testkit.machine_controller's, imported by name
# (module-scoped there; pytest binds imported fixtures as its own).
# ruff: noqa: F811

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.core_v1 import Event as CoreEvent
from lightkube.types import PatchType

from testkit.apiserver import APIServer, apply, install_crds, wait_until
from testkit.harness import Ferryman, ingress, path, rule, served_by
from testkit.kubelet import Kubelet
from testkit.machine_controller import (  # noqa: F401
    FOREIGN,
    FOREIGN_GO,
    FOREIGN_HOOK,
    Machine,
    bare_pod,
    blocked,
    condition,
    controller,
    events,
    get,
    instances,
    kube,
    machine_crd,
    make_machine,
    node,
    own,
    ready,
)
from testkit.workloads import service

OURS = {"name": "IngressTrafficDrain", "owner": "ferryman.io/ingress-controller"}
OURS_GO = "{Name:IngressTrafficDrain Owner:ferryman.io/ingress-controller}"
TIMINGS = [
    "--leader-election-lease-duration", "20",
    "--leader-election-renew-deadline", "15",
    "--leader-election-retry-period", "1",
]  # fmt: skip
CAPI_CRD = Path(__file__).parent / "crds" / "cluster-api-machines.yaml"
CapiMachine = create_namespaced_resource("cluster.x-k8s.io", "v1beta2", "Machine", "machines")
CAPI_DRAIN = "pre-drain.delete.hook.machine.cluster.x-k8s.io/IngressTrafficDrain"
CAPI_TERMINATE = "pre-terminate.delete.hook.machine.cluster.x-k8s.io/IngressTrafficDrain"


class Replicas:
    def __init__(self, tmp: Path, cluster: APIServer, namespace: str) -> None:
        self._tmp, self._cluster, self._namespace = tmp, cluster, namespace
        self.started: dict[str, Ferryman] = {}

    def start(self, name: str, node: str, *extra: str) -> Ferryman:
        f = Ferryman(
            self._tmp / name,
            extra_args=[
                "--watch-namespace", self._namespace,
                "--leader-election-namespace", self._namespace,
                *TIMINGS, *extra,
            ],
            kubeconfig=self._cluster.kubeconfig,
            env={"POD_NAME": f"ferryman-{name}", "NODE_NAME": node},
        )  # fmt: skip
        self.started[name] = f
        f.start()
        return f

    def stop(self) -> None:
        for f in self.started.values():
            if f.proc is not None:
                f.stop()


@pytest.fixture
def replicas(tmp_path: Path, cluster: APIServer, cluster_namespace: str) -> Iterator[Replicas]:
    r = Replicas(tmp_path, cluster, cluster_namespace)
    yield r
    r.stop()


def serve_web(kube: Client, ns: str, host: str, pods: dict[str, str]) -> None:
    """Service web and an Ingress for ``host``, its pods (name -> Node) Ready."""
    for name, on in pods.items():
        kube.create(bare_pod(ns, name, on))
    apply(kube, service("web", ns), ingress("web", [rule(host, path("/", "web"))], namespace=ns))
    wait_until(lambda: all(ready(kube, ns, name) for name in pods), 60, "backends")


def ours_only(events: list[tuple[str, str]]) -> list[str]:
    return [r for r, _ in events if r.startswith("Ingress")]


def is_ready(f: Ferryman) -> bool:
    try:
        return (
            httpx.get(f"http://127.0.0.1:{f.ready_port}/nginx-ready", timeout=2).status_code == 200
        )
    except httpx.HTTPError:
        return False


def hooks(kube: Client, ns: str, name: str) -> dict[str, Any]:
    return dict((get(kube, ns, name).get("spec") or {}).get("lifecycleHooks") or {})


def slow_request(f: Ferryman, host: str, seconds: float) -> tuple[threading.Thread, list[Any]]:
    """A request held open ``seconds`` by the backend, in a thread: (thread, [answer])."""
    out: list[Any] = []

    def go() -> None:
        try:
            r = httpx.get(
                f"http://127.0.0.1:{f.http_port}/slow?delay={seconds}",
                headers={"Host": host},
                timeout=seconds + 30,
            )
            out.append((r.status_code, r.json()["name"]))
        except Exception as e:
            out.append(e)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t, out


def test_a_machine_deletion_waits_for_traffic_to_leave_its_node(
    cluster: APIServer,
    kube: Client,
    controller: Any,
    instances: Path,
    node: Kubelet,
    kubelet: Kubelet,
    cluster_namespace: str,
    replicas: Replicas,
) -> None:
    ns = cluster_namespace
    # web-a runs on the Machine's Node, web-b on the shared one.
    serve_web(kube, ns, "drain.test", {"web-a": node.node, "web-b": kubelet.node})
    make_machine(kube, ns, "m-a", node.node, instances, pre_drain=[FOREIGN])
    make_machine(kube, ns, "m-idle", "node-without-anything", instances)

    on_node = replicas.start("a", node.node, "--machine-lifecycle-hooks", "openshift")
    elsewhere = replicas.start("b", kubelet.node, "--machine-lifecycle-hooks", "openshift")
    for f in (on_node, elsewhere):
        wait_until(lambda f=f: answering(f, "drain.test") == {"web-a", "web-b"}, 60, "both")

    # ferryman's hooks: on the Machine whose Node runs endpoints and a replica,
    # after the foreign one; none on the idle Machine.
    wait_until(
        lambda: hooks(kube, ns, "m-a") == {"preDrain": [FOREIGN, OURS], "preTerminate": [OURS]},
        60,
        "ferryman's hooks",
    )
    assert hooks(kube, ns, "m-idle") == {}

    # Requests to web-a are in flight through the other replica when the deletion
    # starts (round-robin: some of four go there).
    slow = [slow_request(elsewhere, "drain.test", 6) for _ in range(4)]
    web_a = pod_ip(kube, ns, "web-a")
    wait_until(lambda: in_flight_to(elsewhere, web_a) >= 1, 60, "a request in flight to web-a")
    started = time.monotonic()
    kube.delete(Machine, "m-a", namespace=ns)

    # Draining: web-a leaves rotation on both replicas, the Node's replica fails readiness.
    wait_until(
        lambda: "IngressTrafficDraining" in ours_only(events(kube, ns, "m-a")), 60, "Draining"
    )
    wait_until(lambda: not is_ready(on_node), 60, "the Node's replica out of rotation")
    assert is_ready(elsewhere)
    for f in (on_node, elsewhere):
        wait_until(lambda f=f: answering(f, "drain.test") == {"web-b"}, 60, "web-a out")
    both = f"{FOREIGN_GO} {OURS_GO}"
    # The machine controller's status write follows our hook's (a watch event away).
    wait_until(
        lambda: condition(get(kube, ns, "m-a"), "Drainable") == blocked("Drainable", "Drain", both),
        60,
        "Drainable names both hooks",
    )
    assert hooks(kube, ns, "m-a")["preDrain"] == [FOREIGN, OURS]  # held: in flight

    # The request finishes (answered by web-a), then ferryman lets the drain go.
    for thread, _ in slow:
        thread.join(30)
    answers = [answer for _, (answer,) in slow]
    assert all(a[0] == 200 for a in answers) and ("web-a" in {a[1] for a in answers}), answers
    wait_until(lambda: hooks(kube, ns, "m-a").get("preDrain") == [FOREIGN], 60, "our hook removed")
    held = time.monotonic() - started
    assert held >= 3, f"released after {held:.1f}s, with a request in flight"
    only_foreign = blocked("Drainable", "Drain", FOREIGN_GO)
    wait_until(lambda: condition(get(kube, ns, "m-a"), "Drainable") == only_foreign, 60, "cond")
    ours = ["IngressTrafficDraining", "IngressTrafficDrained"]
    wait_until(lambda: ours_only(events(kube, ns, "m-a")) == ours, 60, "Drained")
    drained = 'ferryman_machine_drains_total{result="drained"}'

    def counted() -> float:
        return sum(f.metrics().get(drained, 0) for f in (on_node, elsewhere))

    # Counted once the Event's write returned: the API may show the Event first.
    wait_until(counted, 60, "the drain counted")
    assert counted() == 1  # the leader's

    # The foreign owner releases: the drain evicts web-a. The replica on the
    # Node is not a pod here: stopping it is what its eviction would do, and
    # ferryman's pre-terminate hook waits for that.
    own(kube, ns, "m-a", "preDrain", FOREIGN_HOOK, False)
    wait_until(
        lambda: (condition(get(kube, ns, "m-a"), "Drained") or {}).get("status") == "True",
        60,
        "drained",
    )
    assert hooks(kube, ns, "m-a").get("preTerminate") == [OURS]
    # A client that ignored readiness is still answered while the replica stops.
    late, late_answer = slow_request(on_node, "drain.test", 3)
    wait_until(lambda: on_node.metrics().get("ferryman_requests_in_flight", 0) >= 1, 60, "late")
    on_node.stop()
    late.join(30)
    assert late_answer == [(200, "web-b")]
    wait_until(lambda: _gone(kube, ns, "m-a"), 60, "the Machine deleted")
    # Each Event follows its hook write, so the last may come after the Machine went.
    reasons = ["IngressTrafficDraining", "IngressTrafficDrained", "IngressReplicaStopped"]
    wait_until(lambda: ours_only(events(kube, ns, "m-a")) == reasons, 60, "the drain's Events")
    # One drain: hook writes during it never make the machine controller drain again.
    assert [r for r, _ in events(kube, ns, "m-a")].count("DrainProceeds") == 1
    # Stopped means stopped: the replica's NGINX had exited before the hook went.
    assert nginx_stopped_at(on_node) <= event_time(kube, ns, "m-a", "IngressReplicaStopped")
    # Traffic went on through the other replica all along.
    assert answering(elsewhere, "drain.test") == {"web-b"}


def nginx_stopped_at(f: Ferryman) -> float:
    """When ``f`` logged that its NGINX had exited (seconds since the epoch)."""
    (line,) = [line for line in f.logs().splitlines() if 'msg="nginx stopped"' in line]
    return datetime.datetime.fromisoformat(line.split(" ", 1)[0].replace("Z", "+00:00")).timestamp()


def event_time(kube: Client, ns: str, machine: str, reason: str) -> float:
    fields = {"involvedObject.kind": "Machine", "involvedObject.name": machine, "reason": reason}
    (event,) = kube.list(CoreEvent, namespace=ns, fields=fields)
    assert event.eventTime is not None
    return float(event.eventTime.timestamp())


def answering(f: Ferryman, host: str) -> set[str | None]:
    return {served_by(f, host, f"/{i}") for i in range(8)}


def in_flight_to(f: Ferryman, address: str) -> float:
    """Requests in flight from ``f`` to ``address``:8080, as its /metrics says."""
    name = f'ferryman_upstream_server_requests_in_flight{{server="{address}:8080"}}'
    return f.metrics().get(name, 0.0)


def _gone(kube: Client, ns: str, name: str) -> bool:
    try:
        get(kube, ns, name)
    except ApiError as e:
        return e.status.code == 404
    return False


def pod_ip(kube: Client, ns: str, name: str) -> str:
    from lightkube.resources.core_v1 import Pod

    pod = kube.get(Pod, name, namespace=ns)
    assert pod.status is not None and pod.status.podIP
    return pod.status.podIP


def _delete_with_slow_requests(
    kube: Client,
    ns: str,
    instances: Path,
    node: Kubelet,
    kubelet: Kubelet,
    replicas: Replicas,
    *drain_timeout: str,
) -> Any:
    """One replica elsewhere, requests to the Machine's Node in flight through
    it (each 20 s), then the Machine deleted; the replica."""
    serve_web(kube, ns, "slow.test", {"web-a": node.node, "web-b": kubelet.node})
    make_machine(kube, ns, "m-slow", node.node, instances)
    hooks_flags = ("--machine-lifecycle-hooks", "openshift", "--machine-drain-timeout")
    f = replicas.start("solo", kubelet.node, *hooks_flags, *drain_timeout)
    wait_until(lambda: hooks(kube, ns, "m-slow") == {"preDrain": [OURS]}, 60, "ferryman's hook")
    ip = pod_ip(kube, ns, "web-a")
    for _ in range(10):  # round-robin: some go to web-a
        slow_request(f, "slow.test", 20)
    wait_until(lambda: in_flight_to(f, ip) >= 1, 60, "requests in flight to web-a")
    kube.delete(Machine, "m-slow", namespace=ns)
    return f


def _counted_once(f: Ferryman, result: str) -> None:
    """The drain counted with ``result``, once: counted after its Event's write
    returned, so the API may show the Event before the count moves."""
    name = f'ferryman_machine_drains_total{{result="{result}"}}'
    wait_until(lambda: f.metrics().get(name, 0) >= 1, 60, f"the {result} drain counted")
    assert f.metrics()[name] == 1


def test_a_drain_that_does_not_end_is_released_at_the_timeout_with_a_warning(
    cluster: APIServer,
    kube: Client,
    controller: Any,
    instances: Path,
    node: Kubelet,
    kubelet: Kubelet,
    cluster_namespace: str,
    replicas: Replicas,
) -> None:
    ns = cluster_namespace
    f = _delete_with_slow_requests(kube, ns, instances, node, kubelet, replicas, "3")
    wait_until(
        lambda: "IngressTrafficDrainTimedOut" in ours_only(events(kube, ns, "m-slow")),
        60,
        "timed out",
    )
    note = dict(events(kube, ns, "m-slow"))["IngressTrafficDrainTimedOut"]
    assert "in flight to the Node's endpoints" in note and "within 3s" in note
    _counted_once(f, "timed_out")
    wait_until(lambda: _gone(kube, ns, "m-slow"), 60, "the Machine deleted")


def test_requests_in_flight_hold_a_drain_no_longer_than_the_in_flight_timeout(
    cluster: APIServer,
    kube: Client,
    controller: Any,
    instances: Path,
    node: Kubelet,
    kubelet: Kubelet,
    cluster_namespace: str,
    replicas: Replicas,
) -> None:
    """Slow requests to the leaving Node held the drain to --machine-drain-timeout
    (300 s here); --drain-in-flight-timeout lets it go once the Node is out of rotation."""
    ns = cluster_namespace
    flags = ("300", "--drain-in-flight-timeout", "3")
    f = _delete_with_slow_requests(kube, ns, instances, node, kubelet, replicas, *flags)
    reason = "IngressTrafficDrainInFlightTimedOut"
    wait_until(lambda: reason in ours_only(events(kube, ns, "m-slow")), 60, "in-flight cap")
    note = dict(events(kube, ns, "m-slow"))[reason]
    assert "in flight to the Node's endpoints" in note and "after 3s" in note
    _counted_once(f, "in_flight_timed_out")
    wait_until(lambda: _gone(kube, ns, "m-slow"), 60, "the Machine deleted")


@pytest.fixture(scope="module")
def capi_crd(kube: Client) -> None:
    install_crds(kube, CAPI_CRD)


def test_cluster_api_machines_carry_the_hooks_as_annotations(
    cluster: APIServer,
    kube: Client,
    capi_crd: None,
    kubelet: Kubelet,
    cluster_namespace: str,
    replicas: Replicas,
) -> None:
    ns = cluster_namespace
    serve_web(kube, ns, "capi.test", {"web-b": kubelet.node})
    foreign = "pre-drain.delete.hook.machine.cluster.x-k8s.io/etcd"
    kube.create(
        CapiMachine.from_dict(
            {
                "apiVersion": "cluster.x-k8s.io/v1beta2",
                "kind": "Machine",
                "metadata": {
                    "name": "c1",
                    "namespace": ns,
                    # The test plays Cluster API's controller: its finalizer
                    # keeps the Machine while it is being deleted.
                    "finalizers": ["machine.cluster.x-k8s.io"],
                    "annotations": {foreign: "etcd-operator"},
                },
                "spec": {"clusterName": "test"},
            }
        )
    )
    kube.patch(
        CapiMachine.Status, "c1", {"status": {"nodeRef": {"name": kubelet.node}}},
        namespace=ns, patch_type=PatchType.MERGE,
    )  # fmt: skip
    f = replicas.start("capi", "elsewhere", "--machine-lifecycle-hooks", "cluster-api")

    def annotations() -> dict[str, str]:
        obj = kube.get(CapiMachine, "c1", namespace=ns).to_dict()
        return dict(obj["metadata"].get("annotations") or {})

    wait_until(lambda: annotations().get(CAPI_DRAIN) == OURS["owner"], 60, "ferryman's annotation")
    assert annotations()[foreign] == "etcd-operator"
    assert CAPI_TERMINATE not in annotations()  # no replica on that Node
    kube.delete(CapiMachine, "c1", namespace=ns)
    wait_until(lambda: CAPI_DRAIN not in annotations(), 60, "the annotation removed")
    assert annotations()[foreign] == "etcd-operator"
    # The Event follows the annotation's removal (and is written apart from it).
    both = ["IngressTrafficDraining", "IngressTrafficDrained"]
    wait_until(lambda: ours_only(events(kube, ns, "c1")) == both, 60, "the Drained Event")
    assert served_by(f, "capi.test", "/") == "web-b"  # the only endpoint: kept
    kube.patch(
        CapiMachine, "c1", {"metadata": {"finalizers": None}}, namespace=ns,
        patch_type=PatchType.MERGE,
    )  # fmt: skip
