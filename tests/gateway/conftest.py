"""Fixtures of the Gateway API tests: the conformance binaries, and a cluster
(test apiserver with kube-controller-manager's controllers, the release's
CRDs, a test kubelet giving each pod a network namespace of its own), and the
suite's base pods started on it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import Client
from lightkube.resources.core_v1 import Pod

from testkit.apiserver import APIServer, apply, install_crds, wait_until
from testkit.apiserver import build as build_apiserver
from testkit.gateway_environment import Conformance, build
from testkit.harness import tls_secret
from testkit.kubelet import Kubelet

# The namespaces of the suite's base manifests (v1.6.3).
NAMESPACES = (
    "gateway-conformance-infra",
    "gateway-conformance-app-backend",
    "gateway-conformance-web-backend",
)
GATEWAY_API = "gateway.networking.k8s.io/"


@pytest.fixture(scope="session")
def conformance() -> Conformance:
    return build()


@pytest.fixture(scope="session")
def gateway_cluster(
    conformance: Conformance, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[APIServer]:
    server = APIServer(
        build_apiserver(), tmp_path_factory.mktemp("gateway-cluster"), "--controllers", "all"
    )
    server.start()
    try:
        install_crds(server.client(), *conformance.crd_files())
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def gateway_kubelet(
    gateway_cluster: APIServer, conformance: Conformance, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Kubelet]:
    node = Kubelet(
        gateway_cluster.kubeconfig,
        tmp_path_factory.mktemp("gateway-kubelet"),
        index=5,
        command=conformance.command(),
        pod_netns=True,
    )
    node.start()
    yield node
    node.stop()


def base_manifests(conformance: Conformance) -> Path:
    return conformance.crds.parent / "base-manifests.yaml"


def start_base_pods(kube: Client, conformance: Conformance, kubelet: Kubelet) -> list[Pod]:
    """Applies the suite's base manifests but the Gateways (the suite applies
    those with its class) and returns their pods once every one is Ready: a
    failure here is the environment's, not ferryman's (the suite re-applies
    them in place)."""
    docs = [d for d in yaml.safe_load_all(base_manifests(conformance).read_text()) if d]
    docs = [d for d in docs if not d["apiVersion"].startswith(GATEWAY_API)]
    apply(kube, *[d for d in docs if d["kind"] == "Namespace"])
    apply(kube, *_volume_secrets(docs), *[d for d in docs if d["kind"] != "Namespace"])
    expected = sum(d["spec"].get("replicas", 1) for d in docs if d["kind"] == "Deployment")

    def ready() -> list[Pod]:
        pods = _pods(kube)
        return pods if len(pods) == expected and all(map(_ready, pods)) else []

    try:
        pods: list[Pod] = wait_until(ready, 300, f"{expected} Ready base pods")
    except AssertionError as e:
        states = {
            p.metadata.name: [(c.type, c.status) for c in p.status.conditions or []]
            for p in _pods(kube)
            if not _ready(p)
        }
        raise AssertionError(f"{e}; not ready: {states}; kubelet: {kubelet.errors[-5:]}") from None
    return pods


def _volume_secrets(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Secrets base pods mount: the suite creates them only after the
    Deployments, and the test kubelet starts a pod once its volumes exist."""
    wanted = {
        (d["metadata"]["namespace"], v["secret"]["secretName"])
        for d in docs
        if d["kind"] == "Deployment"
        for v in d["spec"]["template"]["spec"].get("volumes") or []
        if "secret" in v
    }
    return [tls_secret(name, ["abc.example.com"], namespace=ns) for ns, name in sorted(wanted)]


def _pods(kube: Client) -> list[Pod]:
    return [p for ns in NAMESPACES for p in kube.list(Pod, namespace=ns)]


def _ready(pod: Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])
