"""`ferryman machine-controller` walks Machine deletions on a real cluster.

The API server, its Eviction API, PodDisruptionBudgets (whose status the
disruption controller computes) and admission webhooks are Kubernetes' own
(tools/testapiserver --controllers all); each Machine's Node is a test kubelet
running its pods as processes. The test plays the hook owners: a "ferryman"
hook and a foreign one, removed when the test says so. What is asserted is
what a user sees: the Machine's conditions, phase and finalizers, its Events
in order, the Node, its pods, the instance, and the webhook's answers.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import itertools
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from lightkube import Client, codecs
from lightkube.core.exceptions import ApiError
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.authentication_v1 import TokenRequestSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration
from lightkube.resources.apps_v1 import DaemonSet
from lightkube.resources.core_v1 import Event, Node, Pod, ServiceAccount
from lightkube.resources.policy_v1 import PodDisruptionBudget
from lightkube.types import PatchType

from ferryman.machines.hooks import Hook, Point, hook_patch
from testkit.apiserver import APIServer, apply, install_crds, wait_until
from testkit.harness import free_port
from testkit.kubelet import Kubelet

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "deploy" / "crds" / "machines.machine.openshift.io.yaml"
MANIFESTS = ROOT / "deploy" / "machine-controller"
Machine = create_namespaced_resource("machine.openshift.io", "v1beta1", "Machine", "machines")

FERRYMAN = {"name": "ferryman-traffic", "owner": "ferryman.io/ingress-controller"}
FOREIGN = {"name": "backup-volumes", "owner": "storage-operator"}
FERRYMAN_GO = "{Name:ferryman-traffic Owner:ferryman.io/ingress-controller}"
FOREIGN_GO = "{Name:backup-volumes Owner:storage-operator}"
CAPI_DRAIN = "pre-drain.delete.hook.machine.cluster.x-k8s.io/ferryman-traffic"
CAPI_TERMINATE = "pre-terminate.delete.hook.machine.cluster.x-k8s.io/etcd-leave"
FERRYMAN_HOOK = Hook(FERRYMAN["name"], FERRYMAN["owner"])
FOREIGN_HOOK = Hook(FOREIGN["name"], FOREIGN["owner"])
# The owner's value is not compared on removal: only the key goes.
CAPI_DRAIN_HOOK = Hook("ferryman-traffic", "", annotation=True)
CAPI_TERMINATE_HOOK = Hook("etcd-leave", "", annotation=True)
DENIED = 'admission webhook "validation.machine.machine.openshift.io" denied the request: '

_nodes = itertools.count(8)  # kubelet index: its own /24 (10.240+.x.0); 0 is the shared node's


# ---------------------------------------------------------------- fixtures


def _self_signed(tmp: Path) -> tuple[Path, Path, bytes]:
    """A certificate for 127.0.0.1 that is its own CA: the API server's caBundle."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "machine-webhook")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM)
    cert_file, key_file = tmp / "tls.crt", tmp / "tls.key"
    cert_file.write_bytes(pem)
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file, pem


@pytest.fixture(scope="module")
def kube(cluster: APIServer) -> Client:
    return cluster.client()


@pytest.fixture(scope="module")
def machine_crd(kube: Client) -> None:
    install_crds(kube, CRD)
    wait_until(lambda: list(kube.list(Machine, namespace="default")) is not None, 30, "Machines")


def _service_account_kubeconfig(cluster: APIServer, kube: Client, out: Path) -> str:
    """A kubeconfig with a token of deploy/'s ServiceAccount: the tests then show its
    RBAC is enough."""
    for doc in [
        *codecs.load_all_yaml((ROOT / "deploy" / "namespace.yaml").read_text()),
        *codecs.load_all_yaml((MANIFESTS / "rbac.yaml").read_text()),
    ]:
        apply(kube, doc.to_dict())
    token = kube.create(
        ServiceAccount.Token(
            metadata=ObjectMeta(name="ferryman-machine-controller", namespace="ferryman"),
            spec=TokenRequestSpec(audiences=[], expirationSeconds=3600),
        ),
        "ferryman-machine-controller",
        namespace="ferryman",
    )
    assert token.status is not None
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    name = admin["clusters"][0]["name"]
    user = {"name": "mc", "user": {"token": token.status.token}}
    context = {"name": "mc", "context": {"cluster": name, "user": "mc"}}
    config = {"apiVersion": "v1", "kind": "Config", "clusters": admin["clusters"]}
    config |= {"users": [user], "contexts": [context], "current-context": "mc"}
    out.write_text(yaml.safe_dump(config))
    return str(out)


@pytest.fixture(scope="module")
def instances(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("instances")


class ControllerProcess:
    """`ferryman machine-controller` as a process; ``restart`` is a new process
    with the same flags (it keeps nothing but what the Machines say)."""

    def __init__(self, argv: list[str], log: Path, webhook_port: int) -> None:
        self.argv = argv
        self.log = log
        self.webhook_port = webhook_port
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        with self.log.open("a") as out:
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, text=True)

    def stop(self) -> None:
        assert self.proc is not None
        self.proc.terminate()
        assert self.proc.wait(10) == 0

    def restart(self, kube: Client) -> None:
        self.stop()
        self.start()
        self.wait_ready(kube)

    def wait_ready(self, kube: Client) -> None:
        """Until the webhook listens and the API server calls it.

        The probe alone proves nothing while the API server has not loaded the
        webhook's configuration yet (it reads them through an informer): the probe
        is then admitted without a call, and the next Machine a test creates met
        `connection refused` when the process had not bound its port yet."""
        wait_until(lambda: _accepts(self.webhook_port), 30, "the machine webhook's port")
        _wait_webhook(kube)


def _accepts(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=1):
        return True


@pytest.fixture(scope="module")
def controller(
    cluster: APIServer,
    kube: Client,
    machine_crd: None,
    instances: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ControllerProcess]:
    """`ferryman machine-controller` with its webhook registered (failurePolicy Fail)."""
    tmp = tmp_path_factory.mktemp("machine-controller")
    kubeconfig = _service_account_kubeconfig(cluster, kube, tmp / "kubeconfig")
    cert, key, pem = _self_signed(tmp)
    port = free_port()
    process = ControllerProcess(
        [
            str(ROOT / ".venv" / "bin" / "ferryman"), "machine-controller",
            "--kubeconfig", kubeconfig, "--instances-dir", str(instances),
            "--drain-timeout", "3", "--drain-backoff", "0.5", "--eviction-retry-interval", "0.5",
            "--webhook-port", str(port), "--webhook-cert-file", str(cert),
            "--webhook-key-file", str(key),
        ],
        tmp / "controller.log",
        port,
    )  # fmt: skip
    process.start()
    webhook = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "machine-api"},
        "webhooks": [
            {
                "name": "validation.machine.machine.openshift.io",
                "clientConfig": {
                    "url": f"https://127.0.0.1:{port}/validate-machine-openshift-io-v1beta1-machine",
                    "caBundle": base64.b64encode(pem).decode(),
                },
                "rules": [
                    {
                        "apiGroups": ["machine.openshift.io"],
                        "apiVersions": ["v1beta1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["machines"],
                    }
                ],
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 5,
            }
        ],
    }
    kube.create(codecs.from_dict(webhook))
    try:
        process.wait_ready(kube)
        yield process
    finally:
        kube.delete(ValidatingWebhookConfiguration, "machine-api")
        process.stop()  # exits 0 on SIGTERM
        print(process.log.read_text()[-6000:], file=sys.stderr)


_probes = itertools.count()


def _wait_webhook(kube: Client) -> None:
    """Until the webhook answers: a Machine created through it sticks."""
    name = f"probe-{next(_probes)}"
    probe = {"metadata": {"name": name, "namespace": "default"}, "spec": {}}

    def created() -> bool:
        kube.create(
            Machine.from_dict(
                {"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine", **probe}
            )
        )
        return True

    wait_until(created, 30, "the machine webhook")
    kube.delete(Machine, name, namespace="default")


@pytest.fixture
def node(cluster: APIServer, tmp_path: Path) -> Iterator[Kubelet]:
    """A Node of its own for each test's Machine: draining it moves no one else's pods."""
    index = next(_nodes)
    kubelet = Kubelet(
        cluster.kubeconfig, tmp_path / "kubelet", f"machine-node-{index}", index, bind=False
    )
    kubelet.start()
    yield kubelet
    kubelet.stop()


@pytest.fixture
def ns(cluster_namespace: str) -> str:
    return cluster_namespace


# ---------------------------------------------------------------- helpers


def make_machine(
    kube: Client,
    ns: str,
    name: str,
    node: str | None,
    instances: Path,
    pre_drain: list[dict[str, str]] | None = None,
    pre_terminate: list[dict[str, str]] | None = None,
    annotations: dict[str, str] | None = None,
) -> None:
    hooks: dict[str, Any] = {}
    if pre_drain:
        hooks["preDrain"] = pre_drain
    if pre_terminate:
        hooks["preTerminate"] = pre_terminate
    kube.create(
        Machine.from_dict(
            {
                "apiVersion": "machine.openshift.io/v1beta1",
                "kind": "Machine",
                "metadata": {"name": name, "namespace": ns, "annotations": annotations or {}},
                "spec": {"lifecycleHooks": hooks, "providerID": f"local:///{ns}/{name}"},
            }
        )
    )
    (instances / f"{ns}.{name}").write_text("running\n")
    if node:
        kube.patch(
            Machine.Status,
            name,
            {"status": {"nodeRef": {"kind": "Node", "name": node}, "phase": "Running"}},
            namespace=ns,
            patch_type=PatchType.MERGE,
        )


def get(kube: Client, ns: str, name: str) -> dict[str, Any]:
    data: dict[str, Any] = kube.get(Machine, name, namespace=ns).to_dict()
    return data


def condition(machine: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in (machine.get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return {k: c.get(k) for k in ("status", "reason", "message") if c.get(k)}
    return None


def shows(kube: Client, ns: str, name: str, kind: str, want: dict[str, str]) -> bool:
    return condition(get(kube, ns, name), kind) == want


def blocked(kind: str, verb: str, hooks: str) -> dict[str, str]:
    return {
        "status": "False",
        "reason": "HookPresent",
        "message": f"{verb} operation currently blocked by: [{hooks}]",
    }


def events(kube: Client, ns: str, name: str) -> list[tuple[str, str]]:
    """(reason, note) of the Machine's Events, oldest first."""
    # Read through core/v1, which selects by the regarded object (events.k8s.io
    # only by its own fields) and decodes the disruption controller's Events
    # too, which have no eventTime.
    found = list(
        kube.list(
            Event,
            namespace=ns,
            fields={"involvedObject.kind": "Machine", "involvedObject.name": name},
        )
    )
    found.sort(key=lambda e: int((e.metadata.name or "").rpartition(".")[2], 16))
    return [(e.reason or "", e.message or "") for e in found]


def rounds(kube: Client, ns: str, name: str) -> list[tuple[str, float]]:
    """(reason, seconds since the first) of the Machine's drain Events."""
    found = list(
        kube.list(
            Event,
            namespace=ns,
            fields={"involvedObject.kind": "Machine", "involvedObject.name": name},
        )
    )
    times = sorted((e.eventTime.timestamp(), e.reason or "") for e in found if e.eventTime)
    return [(reason, t - times[0][0]) for t, reason in times]


def own(kube: Client, ns: str, name: str, point: Point, hook: Hook, present: bool) -> None:
    """What a hook's owner does (hooks.hook_patch), against the version it read."""
    for _ in range(10):
        machine = get(kube, ns, name)
        patch = hook_patch(machine, point, hook, present)
        if patch is None:
            return
        patch.setdefault("metadata", {})["resourceVersion"] = machine["metadata"]["resourceVersion"]
        try:
            kube.patch(Machine, name, patch, namespace=ns, patch_type=PatchType.MERGE)
            return
        except ApiError as e:
            if e.status.code != 409:  # 409: changed meanwhile (the controller's finalizer)
                raise
    raise AssertionError("could not update the hooks")


def bare_pod(ns: str, name: str, node: str, **metadata: Any) -> Pod:
    return Pod.from_dict(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {"app": "web"}, **metadata},
            "spec": {
                "nodeName": node,
                "terminationGracePeriodSeconds": 2,
                "containers": [
                    {"name": "echo", "image": "echo", "ports": [{"containerPort": 8080}]}
                ],
            },
        }
    )


def pods_on(kube: Client, node: str) -> set[str]:
    return {
        p.metadata.name
        for p in kube.list(Pod, namespace="*", fields={"spec.nodeName": node})
        if p.metadata and p.metadata.name
    }


def ready(kube: Client, ns: str, name: str) -> bool:
    pod = kube.get(Pod, name, namespace=ns)
    conditions = pod.status.conditions if pod.status else None
    return any(c.type == "Ready" and c.status == "True" for c in conditions or [])


def gone(kube: Client, res: Any, name: str, namespace: str | None = None) -> bool:
    try:
        kube.get(res, name, namespace=namespace)
    except ApiError as e:
        return e.status.code == 404
    return False


def still(check: Any, seconds: float) -> bool:
    """``check`` holds throughout ``seconds`` (what must not happen does not)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not check():
            return False
        time.sleep(0.1)
    return True


# ---------------------------------------------------------------- tests


def test_deletion_waits_for_each_hook_owner_then_drains_and_terminates(
    kube: Client, controller: ControllerProcess, node: Kubelet, ns: str, instances: Path
) -> None:
    name = "worker-a"
    # What the drain must move, and what it must leave: a DaemonSet's pod
    # (its controller would put it back) and a mirror pod (the kubelet's own).
    kube.create(bare_pod(ns, "web-1", node.node))
    ds = kube.create(
        DaemonSet.from_dict(
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {"name": "agent", "namespace": ns},
                "spec": {
                    "selector": {"matchLabels": {"app": "agent"}},
                    "template": {
                        "metadata": {"labels": {"app": "agent"}},
                        "spec": {"containers": [{"name": "a", "image": "agent"}]},
                    },
                },
            }
        )
    )
    owner = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "name": "agent",
        "uid": ds.metadata.uid,
        "controller": True,
    }
    kube.create(bare_pod(ns, "agent-x", node.node, ownerReferences=[owner]))
    kube.create(
        bare_pod(ns, "static-x", node.node, annotations={"kubernetes.io/config.mirror": "x"})
    )
    wait_until(lambda: ready(kube, ns, "web-1"), 30, "web-1 running on the machine's node")

    make_machine(
        kube,
        ns,
        name,
        node.node,
        instances,
        pre_drain=[FERRYMAN, FOREIGN],
        pre_terminate=[FERRYMAN],
    )
    # While it lives: the finalizer, and conditions that say what deletion would wait for.
    wait_until(
        lambda: (
            "machine.machine.openshift.io"
            in (get(kube, ns, name)["metadata"].get("finalizers") or [])
        ),
        30,
        "the finalizer",
    )
    wait_until(
        lambda: shows(
            kube,
            ns,
            name,
            "Drainable",
            blocked("Drainable", "Drain", f"{FERRYMAN_GO} {FOREIGN_GO}"),
        ),
        30,
        "Drainable",
    )
    assert shows(kube, ns, name, "Terminable", blocked("Terminable", "Terminate", FERRYMAN_GO))
    assert get(kube, ns, name)["status"]["phase"] == "Running"

    kube.delete(Machine, name, namespace=ns)
    wait_until(
        lambda: get(kube, ns, name)["status"].get("phase") == "Deleting", 30, "phase Deleting"
    )
    wait_until(
        lambda: ("DrainBlocked", "Drain blocked by pre-drain hook") in events(kube, ns, name),
        30,
        "DrainBlocked",
    )
    # Blocked: no cordon, no eviction, for as long as any pre-drain hook stays.
    assert still(lambda: not kube.get(Node, node.node).spec.unschedulable, 1.5)
    assert "web-1" in pods_on(kube, node.node)

    own(kube, ns, name, "preDrain", FOREIGN_HOOK, present=False)  # the foreign owner is done
    wait_until(
        lambda: shows(kube, ns, name, "Drainable", blocked("Drainable", "Drain", FERRYMAN_GO)),
        30,
        "one hook left",
    )
    assert still(lambda: not kube.get(Node, node.node).spec.unschedulable, 1.0)
    assert condition(get(kube, ns, name), "Drained") is None

    own(kube, ns, name, "preDrain", FERRYMAN_HOOK, present=False)  # ferryman is done
    wait_until(
        lambda: shows(
            kube, ns, name, "Drained", {"status": "True", "message": "Drain finished successfully"}
        ),
        60,
        "the drain",
    )
    machine = get(kube, ns, name)
    assert condition(machine, "Drainable") == {"status": "True"}
    assert kube.get(Node, node.node).spec.unschedulable is True
    assert pods_on(kube, node.node) == {"agent-x", "static-x"}
    # Drained, but a pre-terminate hook holds the instance, the Node and the Machine.
    assert condition(machine, "Terminable") == blocked("Terminable", "Terminate", FERRYMAN_GO)
    assert still(lambda: (instances / f"{ns}.{name}").exists(), 1.5)
    assert kube.get(Node, node.node) is not None
    assert get(kube, ns, name)["metadata"]["finalizers"] == ["machine.machine.openshift.io"]

    own(kube, ns, name, "preTerminate", FERRYMAN_HOOK, present=False)
    wait_until(lambda: gone(kube, Machine, name, ns), 30, "the Machine to go")
    assert not (instances / f"{ns}.{name}").exists()
    assert gone(kube, Node, node.node)
    assert events(kube, ns, name) == [
        ("DrainBlocked", "Drain blocked by pre-drain hook"),
        ("DrainBlocked", "Drain blocked by pre-drain hook"),
        ("DrainProceeds", "Node drain proceeds"),
        ("Deleted", f'Node "{node.node}" drained'),
        ("DrainSucceeded", "Node drain succeeded"),
    ]


def test_pod_disruption_budget_holds_the_drain_until_it_allows(
    kube: Client, controller: ControllerProcess, node: Kubelet, ns: str, instances: Path
) -> None:
    name = "worker-b"
    for pod in ("web-1", "web-2"):
        kube.create(bare_pod(ns, pod, node.node))
    kube.create(
        PodDisruptionBudget.from_dict(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "web", "namespace": ns},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
            }
        )
    )

    def allows(n: int) -> bool:
        pdb = kube.get(PodDisruptionBudget, "web", namespace=ns)
        return bool(
            pdb.status and pdb.status.disruptionsAllowed == n and pdb.status.currentHealthy == 2
        )

    wait_until(lambda: allows(1), 60, "the disruption controller's count")
    make_machine(kube, ns, name, node.node, instances)
    wait_until(lambda: shows(kube, ns, name, "Drainable", {"status": "True"}), 30, "Drainable")
    kube.delete(Machine, name, namespace=ns)

    # One pod may go; the other's eviction is refused (429) round after round.
    def drain_error() -> bool:
        c = condition(get(kube, ns, name), "Drained") or {}
        return c.get("reason") == "DrainError"

    wait_until(drain_error, 60, "Drained False with DrainError")
    c = condition(get(kube, ns, name), "Drained")
    assert c is not None and c["status"] == "False"
    assert c["message"].startswith("could not drain machine: 1 pod(s) not evicted within 3s: ")
    assert "disruption budget" in c["message"]
    assert len(pods_on(kube, node.node)) == 1
    # The Event follows the condition.
    requeued = wait_until(
        lambda: [n for r, n in events(kube, ns, name) if r == "DrainRequeued"], 10, "DrainRequeued"
    )
    assert requeued[0].startswith("Node drain requeued: 1 pod(s) not evicted")
    assert not gone(kube, Machine, name, ns)

    requeues = lambda: [r for r, _ in events(kube, ns, name)].count("DrainRequeued")  # noqa: E731
    wait_until(lambda: requeues() >= 2, 60, "a second failed round")
    kube.patch(
        PodDisruptionBudget,
        "web",
        {"spec": {"minAvailable": 0}},
        namespace=ns,
        patch_type=PatchType.MERGE,
    )
    wait_until(
        lambda: gone(kube, Machine, name, ns), 90, "the drain to finish once the budget allows"
    )
    assert pods_on(kube, node.node) == set()
    # Each failed round waits out its backoff (0.5 s, doubling) before the next,
    # though its own status write is a watch event that queues the Machine at once.
    timeline = rounds(kube, ns, name)
    failed = [t for r, t in timeline if r == "DrainRequeued"]
    proceeded = [t for r, t in timeline if r == "DrainProceeds"]
    assert len(proceeded) == len(failed) + 1
    for k, (t_failed, t_next) in enumerate(zip(failed, proceeded[1:], strict=True)):
        assert t_next - t_failed >= 0.5 * 2**k - 0.05, timeline
    reasons = [r for r, _ in events(kube, ns, name)]
    assert reasons[0] == "DrainProceeds" and reasons[-3:] == [
        "DrainProceeds",
        "Deleted",
        "DrainSucceeded",
    ]
    assert set(reasons[1:-3]) <= {"DrainRequeued", "DrainProceeds"}


def test_hooks_are_immutable_once_deletion_starts_and_removable(
    kube: Client, controller: ControllerProcess, ns: str, instances: Path
) -> None:
    name = "worker-c"
    # A Node that is gone already: the drain has nothing to move, but waits for
    # the hooks first (a Machine with no nodeRef would skip the drain at once).
    make_machine(
        kube,
        ns,
        name,
        "gone-node",
        instances,
        pre_drain=[FERRYMAN],
        annotations={CAPI_DRAIN: "ferryman"},
    )
    # Before deletion, hooks come and go freely.
    own(kube, ns, name, "preDrain", FOREIGN_HOOK, present=True)
    own(kube, ns, name, "preDrain", FOREIGN_HOOK, present=False)
    wait_until(lambda: get(kube, ns, name)["metadata"].get("finalizers"), 30, "the finalizer")
    kube.delete(Machine, name, namespace=ns)
    wait_until(
        lambda: get(kube, ns, name)["status"].get("phase") == "Deleting", 30, "phase Deleting"
    )

    def refused(patch: dict[str, Any]) -> str:
        with pytest.raises(ApiError) as e:
            kube.patch(Machine, name, patch, namespace=ns, patch_type=PatchType.MERGE)
        return str(e.value.status.message)

    frozen = (
        "immutable when machine is marked for deletion: the following hooks are new or changed:"
    )
    prefix = f"pre-drain hooks are {frozen} "
    assert refused({"spec": {"lifecycleHooks": {"preDrain": [FERRYMAN, FOREIGN]}}}) == (
        f"{DENIED}spec.lifecycleHooks.preDrain: Forbidden: {prefix}[{FOREIGN_GO}]"
    )
    moved = {**FERRYMAN, "owner": "someone-else"}
    assert refused({"spec": {"lifecycleHooks": {"preDrain": [moved]}}}) == (
        f"{DENIED}spec.lifecycleHooks.preDrain: Forbidden: {prefix}"
        "[{Name:ferryman-traffic Owner:someone-else}]"
    )
    assert refused({"metadata": {"annotations": {CAPI_TERMINATE: "etcd"}}}) == (
        f"{DENIED}metadata.annotations: Forbidden: pre-terminate hooks are {frozen} "
        "[{Name:etcd-leave Owner:etcd}]"
    )
    both = refused(
        {"spec": {"lifecycleHooks": {"preDrain": [FERRYMAN, FOREIGN], "preTerminate": [FOREIGN]}}}
    )
    assert both == (
        f"{DENIED}[spec.lifecycleHooks.preDrain: Forbidden: {prefix}[{FOREIGN_GO}], "
        f"spec.lifecycleHooks.preTerminate: Forbidden: pre-terminate hooks are {frozen} "
        f"[{FOREIGN_GO}]]"
    )
    # Nothing of that was stored; removals are allowed, and release the Machine.
    assert get(kube, ns, name)["spec"]["lifecycleHooks"] == {"preDrain": [FERRYMAN]}
    own(kube, ns, name, "preDrain", CAPI_DRAIN_HOOK, present=False)
    wait_until(
        lambda: shows(kube, ns, name, "Drainable", blocked("Drainable", "Drain", FERRYMAN_GO)),
        30,
        "the spec's hook alone",
    )
    own(kube, ns, name, "preDrain", FERRYMAN_HOOK, present=False)
    wait_until(lambda: gone(kube, Machine, name, ns), 30, "the Machine to go")
    assert events(kube, ns, name) == [
        ("DrainBlocked", "Drain blocked by pre-drain hook"),
        ("DrainBlocked", "Drain blocked by pre-drain hook"),
        ("DrainProceeds", "Node drain proceeds"),
        ("DrainSucceeded", "Node drain succeeded"),
    ]


def test_cluster_api_annotations_are_hooks_too(
    kube: Client, controller: ControllerProcess, node: Kubelet, ns: str, instances: Path
) -> None:
    name = "worker-d"
    kube.create(bare_pod(ns, "web-1", node.node))
    make_machine(
        kube, ns, name, node.node, instances,
        annotations={CAPI_DRAIN: "ferryman.io/ingress-controller", CAPI_TERMINATE: "etcd-operator"},
    )  # fmt: skip
    wait_until(
        lambda: shows(kube, ns, name, "Drainable", blocked("Drainable", "Drain", FERRYMAN_GO)),
        30,
        "Drainable",
    )
    assert shows(
        kube,
        ns,
        name,
        "Terminable",
        blocked("Terminable", "Terminate", "{Name:etcd-leave Owner:etcd-operator}"),
    )
    kube.delete(Machine, name, namespace=ns)
    wait_until(
        lambda: [r for r, _ in events(kube, ns, name)] == ["DrainBlocked"], 30, "DrainBlocked"
    )
    assert still(lambda: not kube.get(Node, node.node).spec.unschedulable, 1.0)

    own(kube, ns, name, "preDrain", CAPI_DRAIN_HOOK, present=False)
    wait_until(
        lambda: shows(
            kube, ns, name, "Drained", {"status": "True", "message": "Drain finished successfully"}
        ),
        60,
        "the drain",
    )
    assert pods_on(kube, node.node) == set()
    assert still(
        lambda: (instances / f"{ns}.{name}").exists() and not gone(kube, Node, node.node), 1.0
    )

    own(kube, ns, name, "preTerminate", CAPI_TERMINATE_HOOK, present=False)
    wait_until(lambda: gone(kube, Machine, name, ns), 30, "the Machine to go")
    assert gone(kube, Node, node.node) and not (instances / f"{ns}.{name}").exists()
    assert [r for r, _ in events(kube, ns, name)] == [
        "DrainBlocked",
        "DrainProceeds",
        "Deleted",
        "DrainSucceeded",
    ]


def test_the_deployment_and_webhook_manifests_are_valid(kube: Client, machine_crd: None) -> None:
    """What deploy/machine-controller/ holds besides RBAC, checked by the API server
    (server-side dry run: nothing runs, nothing is registered)."""
    apply(
        kube,
        *[
            d.to_dict()
            for d in codecs.load_all_yaml((ROOT / "deploy" / "namespace.yaml").read_text())
        ],
    )
    for f in ("deployment.yaml", "webhook.yaml"):
        for doc in codecs.load_all_yaml((MANIFESTS / f).read_text()):
            kube.create(doc, dry_run=True)


def test_a_new_process_resumes_a_deletion_where_the_last_one_stopped(
    kube: Client, controller: ControllerProcess, node: Kubelet, ns: str, instances: Path
) -> None:
    name = "worker-e"
    kube.create(bare_pod(ns, "web-1", node.node))
    make_machine(kube, ns, name, node.node, instances, pre_terminate=[FERRYMAN])
    wait_until(
        lambda: shows(
            kube, ns, name, "Terminable", blocked("Terminable", "Terminate", FERRYMAN_GO)
        ),
        30,
        "Terminable",
    )
    kube.delete(Machine, name, namespace=ns)
    wait_until(
        lambda: shows(
            kube, ns, name, "Drained", {"status": "True", "message": "Drain finished successfully"}
        ),
        60,
        "the drain",
    )
    controller.restart(kube)
    # The new process reads the drain as done: no second drain, only what is left.
    own(kube, ns, name, "preTerminate", FERRYMAN_HOOK, present=False)
    wait_until(lambda: gone(kube, Machine, name, ns), 30, "the Machine to go")
    assert gone(kube, Node, node.node) and not (instances / f"{ns}.{name}").exists()
    assert [r for r, _ in events(kube, ns, name)] == ["DrainProceeds", "Deleted", "DrainSucceeded"]
