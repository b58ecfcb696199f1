"""The machine deletion controller on the test cluster: the Machine CRD, the controller
process, kubelets as Nodes, and Machine helpers.

Moved from tests/kubernetes/test_machine_controller.py, whose tests and others share them."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import itertools
import socket
import subprocess
import sys
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
from lightkube.resources.core_v1 import Event, Pod, ServiceAccount
from lightkube.types import PatchType

from ferryman.machines.hooks import Hook, Point, hook_patch
from testkit.apiserver import APIServer, apply, install_crds, wait_until
from testkit.harness import free_port
from testkit.kubelet import Kubelet

ROOT = Path(__file__).resolve().parents[1]


CRD = ROOT / "deploy" / "crds" / "machines.machine.openshift.io.yaml"


MANIFESTS = ROOT / "deploy" / "machine-controller"


Machine = create_namespaced_resource("machine.openshift.io", "v1beta1", "Machine", "machines")


FOREIGN = {"name": "backup-volumes", "owner": "storage-operator"}


FOREIGN_GO = "{Name:backup-volumes Owner:storage-operator}"


FOREIGN_HOOK = Hook(FOREIGN["name"], FOREIGN["owner"])


_nodes = itertools.count(8)  # kubelet index: its own /24 (10.240+.x.0); 0 is the shared node's


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
    wait_until(lambda: list(kube.list(Machine, namespace="default")) is not None, 60, "Machines")


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
        wait_until(lambda: _accepts(self.webhook_port), 60, "the machine webhook's port")
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

    wait_until(created, 60, "the machine webhook")
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


def ready(kube: Client, ns: str, name: str) -> bool:
    pod = kube.get(Pod, name, namespace=ns)
    conditions = pod.status.conditions if pod.status else None
    return any(c.type == "Ready" and c.status == "True" for c in conditions or [])
