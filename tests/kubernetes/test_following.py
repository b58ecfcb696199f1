"""Ready means caught up (issue 32, item 1), against the real API server.

A replica whose controller stood still for longer than its report Lease lasts
(SIGSTOP here: a long GC pause, a frozen node) answers ``/nginx-ready`` 503
from the moment it runs again until it has listed everything again and its
NGINX applied the result; a pod deleted meanwhile is no longer routed when
it answers 200. Its NGINX serves on throughout, with what it last applied.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable

import httpx
from lightkube import Client
from lightkube.resources.discovery_v1 import EndpointSlice

from testkit.apiserver import APIServer, apply, wait_until
from testkit.harness import (
    Ferryman,
    ingress,
    path,
    rule,
    served_by,
    service_with_backends,
)
from testkit.netns import BackendHost

HOST = "following.test"
LEASE = 6  # seconds: --leader-election-lease-duration, so the stall stays short


def _ready(f: Ferryman, timeout: float = 5) -> int:
    return httpx.get(f"http://127.0.0.1:{f.ready_port}/nginx-ready", timeout=timeout).status_code


def test_a_replica_stopped_longer_than_its_lease_is_ready_only_once_caught_up(
    kube: Client, namespace: str, backends: BackendHost, start_ferryman: Callable[..., Ferryman]
) -> None:
    a, b = backends.start("a"), backends.start("b")
    apply(kube, *service_with_backends("app", [a, b], namespace=namespace))
    apply(kube, ingress("web", [rule(HOST, path("/", "app"))], namespace=namespace))
    f = start_ferryman("ferryman-stall", "--leader-election-lease-duration", str(LEASE))
    wait_until(lambda: {served_by(f, HOST, f"/{i}") for i in range(6)} == {"a", "b"}, 60, "a, b")
    assert f.proc is not None
    os.kill(f.proc.pid, signal.SIGSTOP)
    stopped = time.monotonic()
    answers: list[int] = []
    try:
        # A load balancer's probe sent during the stall: answered once it runs again.
        probe = threading.Thread(target=lambda: answers.append(_ready(f, 120)), daemon=True)
        probe.start()
        kube.delete(EndpointSlice, "app-a", namespace=namespace)  # pod a deleted meanwhile
        # NGINX serves on with what it applied: a is still routed.
        assert "a" in {served_by(f, HOST, f"/{i}") for i in range(6)}
        # The stall is the scenario: longer than the report Lease lasts.
        time.sleep(max(0.0, LEASE + 1 - (time.monotonic() - stopped)))
    finally:
        os.kill(f.proc.pid, signal.SIGCONT)
    probe.join(60)
    assert answers == [503]

    def caught_up() -> bool:
        if _ready(f) != 200:
            return False
        # Ready again: the pod deleted during the stall is gone from the routes.
        assert {served_by(f, HOST, f"/{i}") for i in range(6)} == {"b"}
        return True

    wait_until(caught_up, 60, "ready again")
    assert "behind the API" in f.logs()


def test_a_replica_cut_off_from_the_api_longer_than_its_lease_is_not_ready_until_relisted(
    kube: Client, apiserver: APIServer, namespace: str, backends: BackendHost,
    start_ferryman: Callable[..., Ferryman],
) -> None:  # fmt: skip
    """An API server outage longer than the Lease: 503 (NGINX serves on) until
    the API answers again and every informer has listed; then 200, with what
    changed during the outage's end applied."""
    a = backends.start("a")
    apply(kube, *service_with_backends("app", [a], namespace=namespace))
    apply(kube, ingress("web", [rule(HOST, path("/", "app"))], namespace=namespace))
    f = start_ferryman("ferryman-cut-off", "--leader-election-lease-duration", "3")
    assert _ready(f) == 200
    apiserver.stop()
    try:
        wait_until(lambda: _ready(f) == 503, 60, "not ready without the API")
        assert served_by(f, HOST, "/") == "a"  # traffic goes on with what was applied
    finally:
        apiserver.start()
    wait_until(lambda: _ready(f) == 200, 60, "ready once relisted")
    assert served_by(f, HOST, "/") == "a"
