"""Fixtures of the Gateway API tests: the conformance binaries, and a cluster
(test apiserver with kube-controller-manager's controllers, the release's
CRDs, a test kubelet giving each pod a network namespace of its own), and the
suite's base pods started on it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testkit.apiserver import APIServer, install_crds
from testkit.apiserver import build as build_apiserver
from testkit.gateway_environment import Conformance, build
from testkit.kubelet import Kubelet


@pytest.fixture(scope="session")
def conformance() -> Conformance:
    return build()


@pytest.fixture(scope="session")
def gateway_cluster(
    conformance: Conformance, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[APIServer]:
    server = APIServer(
        build_apiserver(), tmp_path_factory.mktemp("gateway-cluster"), "--controllers", "all",
        # pods/log (the mirror tests read echo-basic's logs): the test kubelet's
        # Node names a Hostname no resolver knows.
        "--", "--kubelet-preferred-address-types=InternalIP",
    )  # fmt: skip
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
