from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from lightkube import Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace

from testkit.apiserver import APIServer, build, install_crds, wait_until
from testkit.harness import Ferryman
from testkit.kubelet import Kubelet
from testkit.netns import BackendHost
from testkit.nic_resources import (
    NIC_CRDS,
    GlobalConfiguration,
    Policy,
    TransportServer,
    VirtualServer,
    VirtualServerRoute,
)

_names = itertools.count()


@pytest.fixture(scope="session")
def apiserver_binary() -> Path:
    return build()


@pytest.fixture(scope="session")
def apiserver(
    apiserver_binary: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[APIServer]:
    server = APIServer(apiserver_binary, tmp_path_factory.mktemp("apiserver"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def kube(apiserver: APIServer) -> Client:
    return apiserver.client()


@pytest.fixture
def namespace(kube: Client) -> str:
    """A fresh namespace per test (nothing deletes namespaces without a controller-manager)."""
    name = f"t{next(_names)}"
    kube.create(Namespace(metadata=ObjectMeta(name=name)))
    return name


@pytest.fixture
def crds(kube: Client) -> Client:
    """``kube`` once NIC's CRDs (deploy/crds) are installed and each kind is listed."""
    install_crds(kube, *NIC_CRDS)
    kinds = (VirtualServer, VirtualServerRoute, Policy, TransportServer, GlobalConfiguration)
    listed = lambda: all(list(kube.list(k, namespace="default")) is not None for k in kinds)  # noqa: E731
    wait_until(listed, 60, "NIC's kinds")
    return kube


@pytest.fixture
def running() -> Iterator[list[Ferryman]]:
    """The ferrymen a test starts (it appends them); those still running are stopped."""
    started: list[Ferryman] = []
    yield started
    for f in started:
        if f.proc is not None:
            f.stop()


@pytest.fixture
def start_ferryman(
    tmp_path: Path, apiserver: APIServer, namespace: str, running: list[Ferryman]
) -> Callable[..., Ferryman]:
    """Starts ferryman in Kubernetes mode on ``apiserver`` as pod ``pod_name``,
    watching the test's namespace (its leader Lease there too), with ``args``
    added; it is stopped after the test."""

    def start(pod_name: str, *args: str) -> Ferryman:
        f = Ferryman(
            tmp_path,
            extra_args=[
                "--watch-namespace", namespace, "--leader-election-namespace", namespace, *args,
            ],
            kubeconfig=apiserver.kubeconfig,
            env={"POD_NAME": pod_name},
        )  # fmt: skip
        running.append(f)
        f.start()
        return f

    return start


@pytest.fixture(scope="session")
def test_host() -> Iterator[BackendHost]:
    host = BackendHost()
    host.create()
    yield host
    host.destroy()


@pytest.fixture
def backends(test_host: BackendHost) -> Iterator[BackendHost]:
    """Echo backends on the test host; ``backends.start(name)`` as in tests/integration."""
    yield test_host
    test_host.stop_backends()


@pytest.fixture(scope="session")
def cluster(
    apiserver_binary: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[APIServer]:
    """An apiserver that also runs kube-controller-manager's controllers."""
    server = APIServer(
        apiserver_binary, tmp_path_factory.mktemp("cluster"), "--controllers", "all",
        # pods/log: the test kubelet's Node names a Hostname no resolver knows.
        "--", "--kubelet-preferred-address-types=InternalIP",
    )  # fmt: skip
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def kubelet(cluster: APIServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubelet]:
    """One Node whose pods run as real processes, each with an address of its own."""
    node = Kubelet(cluster.kubeconfig, tmp_path_factory.mktemp("kubelet"))
    node.start()
    yield node
    node.stop()


@pytest.fixture
def cluster_namespace(cluster: APIServer, kubelet: Kubelet) -> Iterator[str]:
    """A fresh namespace on ``cluster``; deleted afterwards (its pods end like in a cluster)."""
    kube = cluster.client()
    name = f"c{next(_names)}"
    kube.create(Namespace(metadata=ObjectMeta(name=name)))
    yield name
    kube.delete(Namespace, name)
