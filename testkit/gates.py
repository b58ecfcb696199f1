"""The readiness gate replicas: a leader and a follower ferryman with their webhooks, on
the test cluster.

Moved from tests/kubernetes/test_gates.py, whose tests and others share them."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from lightkube import Client
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Namespace
from lightkube.types import PatchType

from testkit.apiserver import APIServer, wait_until
from testkit.harness import Ferryman

GATE = "target-health.ferryman.io/ferryman"


# The replicas' Leases (leadership and reports) last long enough that a replica
# held still for the test's few seconds stays live; renewals come every second.
TIMINGS = [
    "--leader-election-lease-duration", "20",
    "--leader-election-renew-deadline", "15",
    "--leader-election-retry-period", "1",
]  # fmt: skip


def opt_in(kube: Client, namespace: str) -> None:
    kube.patch(
        Namespace,
        namespace,
        {"metadata": {"labels": {"ferryman.io/pod-readiness-gate-inject": "enabled"}}},
        patch_type=PatchType.MERGE,
    )


class Replicas:
    """ferryman replicas in Kubernetes mode with --readiness-gates, in the test's namespace."""

    def __init__(self, tmp_path: Path, cluster: APIServer, namespace: str) -> None:
        self._tmp, self._cluster, self._namespace = tmp_path, cluster, namespace
        self.started: dict[str, Ferryman] = {}

    def start(self, names: tuple[str, ...], *extra: str) -> dict[str, Ferryman]:
        for name in names:
            f = Ferryman(
                self._tmp / name,
                extra_args=[
                    "--watch-namespace", self._namespace,
                    "--readiness-gates",
                    "--leader-election-namespace", self._namespace,
                    *(extra or TIMINGS),
                ],
                kubeconfig=self._cluster.kubeconfig,
                env={"POD_NAME": f"ferryman-{name}"},
            )  # fmt: skip
            self.started[name] = f
            f.start()
        return self.started

    def stop(self) -> None:
        for f in self.started.values():
            if f.proc is not None and f.proc.poll() is None:
                os.kill(f.proc.pid, signal.SIGCONT)
            if f.proc is not None:
                f.stop()


@pytest.fixture
def replicas(tmp_path: Path, cluster: APIServer, cluster_namespace: str) -> Iterator[Replicas]:
    r = Replicas(tmp_path, cluster, cluster_namespace)
    yield r
    r.stop()


def leader_and_follower(
    kube: Client, namespace: str, replicas: dict[str, Ferryman]
) -> tuple[Ferryman, Ferryman]:
    def holder() -> str | None:
        lease = kube.get(Lease, "ferryman-leader-election", namespace=namespace)
        return lease.spec.holderIdentity if lease.spec else None

    name = wait_until(holder, 60, "a leader").removeprefix("ferryman-")
    (other,) = set(replicas) - {name}
    return replicas[name], replicas[other]


def start_with_webhooks(
    replicas: Replicas, ns: str, config: str, ports: dict[str, int], timings: list[str]
) -> None:
    """One replica per ``ports`` entry, each serving the readiness gate webhook
    of ``config`` on its port with the namespace's certificate Secret."""
    for name, port in ports.items():
        replicas.start(
            (name,), *timings,
            "--readiness-gate-webhook-port", str(port),
            "--readiness-gate-webhook-cert-secret", f"{ns}/webhook-cert",
            "--readiness-gate-webhook-cert-hosts", "127.0.0.1",
            "--readiness-gate-webhook-configuration", config,
        )  # fmt: skip
