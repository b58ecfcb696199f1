"""Every pod that should be gated is gated (issue 32, item 3), against the real
API server: with deploy/'s webhook configuration as shipped, a replica whose
process stands still (SIGSTOP: a GC pause, a frozen node) never lets a pod of
an opted-in namespace through without the gate. The API server's call times
out and, with failurePolicy Fail, the pod is refused; its ReplicaSet creates
it again, and the call that reaches a replica that answers adds the gate.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from lightkube import ApiError, Client

from testkit.apiserver import APIServer, apply, wait_until
from testkit.harness import free_port, ingress, path, rule
from testkit.webhook import (
    GATE,
    _configuration,
    _ferryman,
    _pod,
    _service,
    cluster_objects,  # noqa: F401 (a fixture)
    pods_namespace,  # noqa: F401 (a fixture)
)


def test_a_stalled_replica_never_lets_a_pod_through_without_its_gate(
    tmp_path: Path, apiserver: APIServer, kube: Client, pods_namespace: str,  # noqa: F811
    cluster_objects: list[str],  # noqa: F811
) -> None:  # fmt: skip
    ns = pods_namespace
    config, port = f"stall-{ns}", free_port()
    apply(
        kube,
        _service("web", ns, {"app": "web"}),
        ingress("web", [rule("web.test", path("/", "web"))], namespace=ns),
    )
    cluster_objects.append(config)
    doc = _configuration(config, ns, port)  # failurePolicy and timeout as deploy/ ships them
    apply(kube, doc)
    f = _ferryman(tmp_path, apiserver, ns, port, config)
    f.start()
    try:
        wait_until(lambda: _pod(kube, ns, {"app": "web"}) == [GATE], 60, "gated")
        assert f.proc is not None
        os.kill(f.proc.pid, signal.SIGSTOP)
        try:
            began = time.monotonic()
            with pytest.raises(ApiError) as refused:
                _pod(kube, ns, {"app": "web"})
            took = time.monotonic() - began
            assert "readiness-gates.ferryman.io" in str(refused.value.status.message)
            # Refused once the API server's wait is over, not later.
            assert took < doc["webhooks"][0]["timeoutSeconds"] + 5
        finally:
            os.kill(f.proc.pid, signal.SIGCONT)
        wait_until(lambda: _pod(kube, ns, {"app": "web"}) == [GATE], 60, "gated again")
    finally:
        f.stop()
