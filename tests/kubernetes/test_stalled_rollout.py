"""A rollout with one of two replicas stopped for longer than its Lease (issue 32,
item 4): Kubernetes' own controllers and the test kubelet move the pods, the
webhook is called on the stopped replica, and a client follows each replica's
``/nginx-ready`` as a load balancer does. No request fails, and every new pod
is created with the gate.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import httpx
import pytest
from lightkube.resources.admissionregistration_v1 import MutatingWebhookConfiguration
from lightkube.resources.core_v1 import Pod

from testkit.apiserver import APIServer, apply, wait_until
from testkit.gates import (  # noqa: F401
    GATE,
    Replicas,
    leader_and_follower,
    opt_in,
    replicas,
    start_with_webhooks,
)
from testkit.harness import Ferryman, free_port, ingress, path, rule, served_by
from testkit.kubelet import Kubelet
from testkit.webhook import _configuration as webhook_configuration
from testkit.webhook import wait_trusted
from testkit.workloads import deployment, live_pods, rolled_out, service

HOST = "stall.test"
LEASE = 6  # seconds; the stall is longer
STALL = LEASE + 6
TIMINGS = [
    "--leader-election-lease-duration", str(LEASE),
    "--leader-election-renew-deadline", "4",
    "--leader-election-retry-period", "1",
]  # fmt: skip


class FollowingClient(threading.Thread):
    """Sends each request through a replica whose ``/nginx-ready`` answers 200
    now (a probe that does not answer within 0.5 s counts as not ready)."""

    def __init__(self, servers: list[Ferryman]) -> None:
        super().__init__(daemon=True)
        self.replicas, self.done = servers, threading.Event()
        self.sent = 0
        self.failed: list[str] = []

    def _ready(self, f: Ferryman) -> bool:
        try:
            url = f"http://127.0.0.1:{f.ready_port}/nginx-ready"
            return httpx.get(url, timeout=0.5).status_code == 200
        except httpx.HTTPError:
            return False

    def run(self) -> None:
        i = 0
        while not self.done.is_set():
            i += 1
            ready = [f for f in self.replicas if self._ready(f)]
            if not ready:
                continue
            f = ready[i % len(ready)]
            self.sent += 1
            try:
                r = httpx.get(f"http://127.0.0.1:{f.http_port}/", headers={"Host": HOST}, timeout=5)
                if r.status_code != 200:
                    self.failed.append(f"{r.status_code} via {f.workdir.name}")
            except httpx.HTTPError as e:
                self.failed.append(f"{type(e).__name__} via {f.workdir.name}")


@pytest.mark.parametrize("stopped_role", ["follower", "leader"])
@pytest.mark.parametrize("webhook_on", ["stopped", "running"])
def test_a_rollout_with_a_replica_stopped_past_its_lease_fails_nothing_and_gates_every_pod(
    cluster: APIServer, kubelet: Kubelet, cluster_namespace: str, replicas: Replicas,  # noqa: F811
    webhook_on: str, stopped_role: str,
) -> None:  # fmt: skip
    """``webhook_on``: the replica the API server calls. The stopped one: pods are
    refused until it runs again. The running one: the rollout goes on while the
    other is stopped, pods are deleted behind its back, and it must not take
    traffic again before it has caught up. ``stopped_role``: the leader (which
    opens the gates and writes status) or the other replica is stopped."""
    kube, ns = cluster.client(), cluster_namespace
    opt_in(kube, ns)
    apply(kube, service("web", ns), ingress("web", [rule(HOST, path("/", "web"))], namespace=ns))
    config, ports = f"stall-{ns}", {"a": free_port(), "b": free_port()}
    apply(kube, webhook_configuration(config, ns, ports["a"]))
    try:
        start_with_webhooks(replicas, ns, config, ports, TIMINGS)
        leader, follower = leader_and_follower(kube, ns, replicas.started)
        stopped, running = (leader, follower) if stopped_role == "leader" else (follower, leader)
        # deploy/'s configuration (failurePolicy Fail) calling one replica.
        called = stopped if webhook_on == "stopped" else running
        apply(kube, webhook_configuration(config, ns, ports[called.workdir.name]))
        wait_trusted(kube, config)
        apply(kube, deployment("web", ns, 2, "v1"))
        wait_until(lambda: rolled_out(kube, ns, "web", 2), 60, "first pods")
        first = live_pods(kube, ns)
        for f in (running, stopped):
            wait_until(
                lambda f=f: {served_by(f, HOST, f"/{i}") for i in range(12)} == first, 60, "both"
            )
        client = FollowingClient([running, stopped])
        client.start()
        assert stopped.proc is not None
        os.kill(stopped.proc.pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        try:
            apply(kube, deployment("web", ns, 2, "v2"))
            # The stall is the scenario: longer than the Lease, and long enough
            # for the gates to open without it (its report expired) meanwhile.
            time.sleep(max(0.0, STALL - (time.monotonic() - stopped_at)))
        finally:
            os.kill(stopped.proc.pid, signal.SIGCONT)
        wait_until(lambda: rolled_out(kube, ns, "web", 2), 120, "rolled out")
        wait_until(lambda: not (live_pods(kube, ns) & first), 60, "old pods gone")
        new = live_pods(kube, ns)
        for f in (running, stopped):
            wait_until(
                lambda f=f: {served_by(f, HOST, f"/{i}") for i in range(12)} == new, 60, "new"
            )
        client.done.set()
        client.join(30)
        ungated = [
            p.metadata.name
            for p in kube.list(Pod, namespace=ns)
            if p.metadata and GATE not in [g.conditionType for g in p.spec.readinessGates or []]
            if p.spec
        ]
        assert ungated == []
        assert client.sent > 10
        assert client.failed == []
    finally:
        kube.delete(MutatingWebhookConfiguration, config)
    assert kubelet.errors == []
