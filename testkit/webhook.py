"""The readiness gate webhook on the test cluster: its configuration, pods, Services and
the ferryman serving it.

Moved from tests/kubernetes/test_webhook.py, whose tests and others share them."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import Client
from lightkube.models.core_v1 import Container, PodReadinessGate, PodSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.admissionregistration_v1 import MutatingWebhookConfiguration
from lightkube.resources.core_v1 import Namespace, Pod, ServiceAccount

from ferryman.resources.readiness_gate import INJECT_LABEL, gate_type
from testkit.apiserver import APIServer, wait_until
from testkit.harness import Ferryman

DEPLOY = Path(__file__).resolve().parents[1] / "deploy" / "webhook.yaml"


GATE = gate_type("ferryman")


def _configuration(name: str, namespace: str, port: int) -> dict[str, Any]:
    """deploy/'s configuration, calling ``127.0.0.1:port`` for ``namespace`` only."""
    doc = next(d for d in yaml.safe_load_all(DEPLOY.read_text()) if d["kind"].startswith("Mut"))
    doc = copy.deepcopy(doc)
    doc["metadata"]["name"] = name
    for hook in doc["webhooks"]:
        hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}/readiness-gates"}
        hook["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"] = namespace
    return dict(doc)


def wait_trusted(kube: Client, name: str, timeout: float = 60) -> None:
    """Until every webhook of configuration ``name`` has the caBundle ferryman keeps."""
    wait_until(
        lambda: all(
            w.clientConfig.caBundle
            for w in kube.get(MutatingWebhookConfiguration, name).webhooks or []
        ),
        timeout,
        "the webhook trusted",
    )


def _service(name: str, namespace: str, selector: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": selector, "ports": [{"port": 80}]},
    }


def _opt_in(kube: Client, namespace: str, on: bool) -> None:
    labels = {INJECT_LABEL: "enabled" if on else None}  # None removes it
    kube.patch(Namespace, namespace, {"metadata": {"labels": labels}})


def _pod(
    kube: Client, namespace: str, labels: dict[str, str], gates: tuple[str, ...] = ()
) -> list[str]:
    """Creates a pod (by generateName, as a ReplicaSet does); its gates as created."""
    pod = Pod(
        metadata=ObjectMeta(generateName="p-", labels=labels),
        spec=PodSpec(
            containers=[Container(name="c", image="example.invalid/app")],
            readinessGates=[PodReadinessGate(conditionType=g) for g in gates] or None,
        ),
    )
    created = kube.create(pod, namespace=namespace)
    assert created.spec is not None
    return [g.conditionType for g in created.spec.readinessGates or []]


def _gated_once_trusted(kube: Client, namespace: str, labels: dict[str, str]) -> None:
    """Creates pods until one is created with ferryman's gate (and no other).

    A caBundle read back from the API server is not yet the one its admission
    plugin uses: that reads webhook configurations from its own cache, a moment
    later (seconds on a loaded machine). Until then the call fails TLS and the pod
    is refused (failurePolicy Fail) or created without the gate (Ignore); ferryman
    never sees such a call, so its review counts are unchanged."""

    def gated() -> bool:
        return _pod(kube, namespace, labels) == [GATE]

    wait_until(gated, 60, f"a pod labelled {labels} created with the gate")


@pytest.fixture
def cluster_objects(kube: Client) -> Iterator[list[str]]:
    """Names of MutatingWebhookConfigurations to delete afterwards (they are
    cluster-wide, and a webhook left behind would be called by later tests)."""
    names: list[str] = []
    yield names
    for name in names:
        kube.delete(MutatingWebhookConfiguration, name)


@pytest.fixture
def pods_namespace(kube: Client, namespace: str) -> str:
    """The test namespace, opted in, with the ServiceAccount pods are admitted with
    (the serviceaccount controller does not run here)."""
    kube.create(ServiceAccount(metadata=ObjectMeta(name="default")), namespace=namespace)
    _opt_in(kube, namespace, True)
    return namespace


def _ferryman(
    tmp_path: Path, apiserver: APIServer, namespace: str, port: int, configuration: str,
    name: str = "a", secret: str = "webhook-cert",
) -> Ferryman:  # fmt: skip
    args = [
        "--watch-namespace", namespace,
        "--leader-election-namespace", namespace,
        "--readiness-gate-webhook-port", str(port),
        "--readiness-gate-webhook-cert-secret", f"{namespace}/{secret}",
        "--readiness-gate-webhook-cert-hosts", "127.0.0.1",
        "--readiness-gate-webhook-configuration", configuration,
    ]  # fmt: skip
    return Ferryman(
        tmp_path / name,
        extra_args=args,
        kubeconfig=apiserver.kubeconfig,
        env={"POD_NAME": f"ferryman-{name}"},
    )
