"""The cluster bench/machine_drain.py deletes a Machine in: a real apiserver with
kube-controller-manager's controllers, ``ferryman machine-controller``, two test
kubelets (the Machine's Node and a shared one), the Deployment ``web`` placed on
both, and two ferryman replicas, one on each Node (bench/machine_drain.py's
docstring says why each is so)."""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Event, Namespace, Pod
from lightkube.types import PatchType

from bench.processes import FERRYMAN, ROOT
from bench.rollout import app_deployment
from testkit.apiserver import APIServer, apply, build, install_crds, wait_until
from testkit.harness import Ferryman, ingress, path, rule
from testkit.kubelet import Kubelet, echo_command
from testkit.workloads import rolled_out, service

NAMESPACE = "bench"
MACHINE_NAMESPACE = "openshift-machine-api"
MACHINE = "worker-0"
APP = "web"
HOST = "drain.bench.test"
INGRESS_CLASS = "ferryman"
CRD = ROOT / "deploy" / "crds" / "machines.machine.openshift.io.yaml"
Machine = create_namespaced_resource("machine.openshift.io", "v1beta1", "Machine", "machines")
# Kubelet indexes pick each Node's /24 (10.<232+index>.x.0) and network namespace:
# the test fixtures use 0, 1 and 8 upward, so a bench run beside them collides with none.
NODES = {"shared": ("shared-node", 21), "machine": ("machine-node", 20)}
# Leader election paced for a run of a minute or two (the test suite's timings).
LEADER_TIMINGS = [
    "--leader-election-lease-duration", "20",
    "--leader-election-renew-deadline", "15",
    "--leader-election-retry-period", "1",
]  # fmt: skip
# The replica on the Machine's Node runs outside the Node's network namespace
# (the load reaches it on loopback); its pod's process, run by that Node's
# kubelet, passes the kubelet's SIGTERM on to it and lives as long as it does,
# so the drain evicts the replica and waits for it as for any pod.
REPLICA_POD = "ferryman-replica"
RELAY = """
import os, signal, sys, time
pid = int(sys.argv[1])
signal.signal(signal.SIGTERM, lambda *_: os.kill(pid, signal.SIGTERM))
print("ready", flush=True)
def alive():
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
while alive():
    time.sleep(0.05)
"""


def pods_on(kube: Client, node: str) -> set[str]:
    return {
        p.metadata.name
        for p in kube.list(Pod, namespace=NAMESPACE, labels={"app": APP})
        if p.spec.nodeName == node and not p.metadata.deletionTimestamp
    }


def pod_ready(kube: Client, name: str) -> bool:
    pod = kube.get(Pod, name, namespace=NAMESPACE)
    conditions = (pod.status.conditions if pod.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def replica_pod(node: str, grace: float) -> dict[str, Any]:
    """The pod of the replica on ``node`` (REPLICA_POD); its grace period leaves
    the replica's own, and then time for requests in flight (deploy/'s 60 s
    for a 15 s one)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": REPLICA_POD, "namespace": NAMESPACE, "labels": {"app": "ferryman"}},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": int(grace) + 45,
            "containers": [{"name": "ferryman", "image": "ferryman"}],
        },
    }


def machine_crd(kube: Client) -> None:
    install_crds(kube, CRD)
    wait_until(lambda: list(kube.list(Machine, namespace="*")) is not None, 30, "Machines")


def make_machine(kube: Client, node: str, instances: Path) -> None:
    """A Machine whose instance (the local provider's file) runs ``node``."""
    kube.create(
        Machine.from_dict(
            {
                "apiVersion": "machine.openshift.io/v1beta1",
                "kind": "Machine",
                "metadata": {"name": MACHINE, "namespace": MACHINE_NAMESPACE},
                "spec": {"providerID": f"local:///{MACHINE_NAMESPACE}/{MACHINE}"},
            }
        )
    )
    instance(instances).write_text("running\n")
    kube.patch(
        Machine.Status, MACHINE,
        {"status": {"nodeRef": {"kind": "Node", "name": node}, "phase": "Running"}},
        namespace=MACHINE_NAMESPACE, patch_type=PatchType.MERGE,
    )  # fmt: skip


def instance(instances: Path) -> Path:
    return instances / f"{MACHINE_NAMESPACE}.{MACHINE}"


def machine(kube: Client) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = kube.get(Machine, MACHINE, namespace=MACHINE_NAMESPACE).to_dict()
    except ApiError as e:
        if e.status.code == 404:
            return None
        raise
    return data


def our_hooks(m: dict[str, Any] | None) -> set[str]:
    """The points where ferryman's hook sits on the Machine."""
    hooks = ((m or {}).get("spec") or {}).get("lifecycleHooks") or {}
    return {p for p, hs in hooks.items() if any(h["name"] == "IngressTrafficDrain" for h in hs)}


def drained(m: dict[str, Any]) -> bool:
    conditions = (m.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Drained" and c["status"] == "True" for c in conditions)


def machine_events(kube: Client, since: float) -> list[tuple[str, float]]:
    """(reason, seconds after ``since``, a wall-clock time) of the Machine's Events."""
    found = kube.list(
        Event, namespace=MACHINE_NAMESPACE,
        fields={"involvedObject.kind": "Machine", "involvedObject.name": MACHINE},
    )  # fmt: skip
    timed = [(e.eventTime.timestamp(), e.reason or "") for e in found if e.eventTime]
    return [(reason, round(t - since, 2)) for t, reason in sorted(timed)]


def leader(kube: Client) -> str | None:
    try:
        lease = kube.get(Lease, "ferryman-leader-election", namespace=NAMESPACE)
    except ApiError:
        return None
    return lease.spec.holderIdentity if lease.spec else None


class Cluster:
    """Everything the bench starts, stopped in reverse order (each at most once)."""

    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args, self.work = args, work
        self.instances = work / "instances"
        self.server = APIServer(build(), work / "apiserver", "--controllers", "all")
        self.kubelets: dict[str, Kubelet] = {}
        self.replicas: dict[str, Ferryman] = {}
        self.controller: subprocess.Popen[bytes] | None = None
        self.kubelet_stopped = threading.Event()
        self._stopping: threading.Thread | None = None  # the Machine's kubelet, once gone

    def start(self) -> Client:
        args = self.args
        self.server.start()
        kube = self.server.client()
        machine_crd(kube)
        self.instances.mkdir(parents=True, exist_ok=True)
        with (self.work / "machine-controller.log").open("ab") as log:
            self.controller = subprocess.Popen(
                [str(FERRYMAN), "machine-controller", "--kubeconfig", self.server.kubeconfig,
                 "--instances-dir", str(self.instances)],
                stdout=log, stderr=log,
            )  # fmt: skip
        for role, (node, index) in NODES.items():
            kubelet = Kubelet(
                self.server.kubeconfig, self.work / f"kubelet-{role}", node, index,
                command=self._command, bind=role == "machine",
            )  # fmt: skip
            kubelet.start()
            self.kubelets[role] = kubelet
        for ns in (NAMESPACE, MACHINE_NAMESPACE):
            kube.create(Namespace(metadata=ObjectMeta(name=ns)))
        # Two pods on the Machine's Node, then two on the shared one.
        first = argparse.Namespace(
            **{**vars(args), "replicas": 2, "gates": False, "webhook": False},
            max_surge=1, max_unavailable=0,  # bench/rollout.py's defaults
        )  # fmt: skip
        apply(kube, app_deployment(first), service(APP, NAMESPACE))
        apply(kube, ingress(APP, [rule(HOST, path("/", APP))], namespace=NAMESPACE))
        self._wait_pods(kube, 2, "the Machine's pods")
        self.kubelets["machine"].bind, self.kubelets["shared"].bind = False, True
        kube.patch(
            Deployment, APP, {"spec": {"replicas": 4}}, namespace=NAMESPACE,
            patch_type=PatchType.MERGE,
        )  # fmt: skip
        self._wait_pods(kube, 4, "the shared Node's pods")
        for role, (node, _) in NODES.items():
            placed = pods_on(kube, node)
            assert len(placed) == 2, f"{role} Node runs {placed}"
        make_machine(kube, NODES["machine"][0], self.instances)
        wait_until(
            lambda: (
                "machine.machine.openshift.io"
                in (machine(kube) or {})["metadata"].get("finalizers", [])
            ),
            60,
            "the machine controller's finalizer",
        )
        # The first to start leads, as a rule.
        for role in sorted(NODES, key=lambda r: r != args.leader):
            self.replicas[role] = f = self._ferryman(role)
            f.start(wait=False)
            f.wait_ready(60)
        kube.create(Pod.from_dict(replica_pod(NODES["machine"][0], args.grace)))
        wait_until(lambda: pod_ready(kube, REPLICA_POD), 30, "the replica's pod")
        if args.hook:
            want = {"preDrain", "preTerminate"}
            wait_until(lambda: our_hooks(machine(kube)) == want, 60, "ferryman's hooks")
        every = pods_on(kube, NODES["machine"][0]) | pods_on(kube, NODES["shared"][0])
        for f in self.replicas.values():
            wait_until(
                lambda f=f: {f.get(HOST, f"/warm/{i}").served_by for i in range(40)} == every,
                60,
                "both replicas route to every pod",
            )
        return kube

    def _wait_pods(self, kube: Client, replicas: int, what: str) -> None:
        """Until the Deployment has ``replicas`` pods available; a timeout says
        what the kubelets failed to do."""
        try:
            wait_until(lambda: rolled_out(kube, NAMESPACE, APP, replicas), 120, what)
        except AssertionError as e:
            errors = {role: k.errors[-3:] for role, k in self.kubelets.items() if k.errors}
            raise AssertionError(f"{e}; kubelet errors: {errors or 'none'}") from None

    def _command(self, pod: dict[str, Any], ip: str, ports: list[int]) -> list[str]:
        if pod["metadata"]["name"] != REPLICA_POD:
            return echo_command(pod, ip, ports)
        f = self.replicas["machine"]
        assert f.proc is not None
        return [sys.executable, "-c", RELAY, str(f.proc.pid)]

    def _ferryman(self, role: str) -> Ferryman:
        args = self.args
        hooks = ["--machine-lifecycle-hooks", "openshift"] if args.hook else []
        timeout = ["--machine-drain-timeout", f"{args.drain_timeout:g}"] if args.hook else []
        return Ferryman(
            self.work / f"ferryman-{role}",
            extra_args=[
                "--watch-namespace", NAMESPACE, "--ingress-class", INGRESS_CLASS,
                "--shutdown-grace-period", f"{args.grace:g}", *LEADER_TIMINGS, *hooks, *timeout,
            ],
            kubeconfig=self.server.kubeconfig,
            env={"POD_NAME": f"ferryman-{role}", "POD_NAMESPACE": NAMESPACE,
                 "NODE_NAME": NODES[role][0]},
        )  # fmt: skip

    def machine_gone(self) -> None:
        """What the instance's deletion does to what ran there: its kubelet and
        network go (in the background: stopping takes a while), and a replica
        still running (its drain given up on) dies."""
        f = self.replicas["machine"]
        if f.proc is not None and f.proc.poll() is None:
            f.proc.kill()

        def stop() -> None:
            self.kubelets["machine"].stop()
            self.kubelet_stopped.set()

        self._stopping = threading.Thread(target=stop, daemon=True)
        self._stopping.start()

    def stop(self) -> None:
        for f in self.replicas.values():
            if f.proc is not None:
                f.stop()
        for role, kubelet in self.kubelets.items():
            if role == "machine" and self._stopping is not None:
                self._stopping.join(60)
            else:
                kubelet.stop()
        if self.controller is not None:
            self.controller.terminate()
            self.controller.wait(10)
        self.server.stop()
