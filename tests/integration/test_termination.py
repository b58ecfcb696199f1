"""Graceful termination: of the backends (serving-terminating endpoints) and of
ferryman itself (``--shutdown-grace-period``), with real NGINX and real backends."""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

import httpx

from testkit.connections import NewConnections
from testkit.harness import (
    Backend,
    Backends,
    Ferryman,
    eventually,
    ingress,
    path,
    rule,
    service,
)


def _slices(name: str, **conditions: tuple[Backend, dict[str, bool]]) -> list[dict[str, Any]]:
    """The Service ``name`` and one EndpointSlice per backend with its conditions."""
    docs = service(name)
    for slice_name, (b, cond) in conditions.items():
        docs.append(
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": f"{name}-{slice_name}",
                    "namespace": "default",
                    "labels": {"kubernetes.io/service-name": name},
                },
                "addressType": "IPv4",
                "ports": [{"port": b.port}],
                "endpoints": [{"addresses": ["127.0.0.1"], "conditions": cond}],
            }
        )
    return docs


READY = {"ready": True, "serving": True, "terminating": False}
# What the EndpointSlice controller writes for a pod being deleted that still answers.
DRAINING = {"ready": False, "serving": True, "terminating": True}
GONE = {"ready": False, "serving": False, "terminating": True}


def _answers(f: Ferryman, host: str, n: int = 12) -> set[str]:
    """Who answered ``n`` requests: backend names, or the status when not 200."""
    out = set()
    for _ in range(n):
        r = f.get(host, "/")
        out.add((r.served_by or "?") if r.status == 200 else str(r.status))
    return out


def test_serving_terminating_endpoints_answer_when_no_ready_one_is_left(
    ferryman: Ferryman, backends: Backends
) -> None:
    old1, old2, new = backends.start("old1"), backends.start("old2"), backends.start("new")
    ferryman.write("svc", _slices("app", a=(old1, READY), b=(old2, READY)))
    ferryman.write("ing", ingress("r", [rule("drain.test", path("/", "app"))]))
    ferryman.start()
    eventually(lambda: _answers(ferryman, "drain.test") == {"old1", "old2"}, 60, "both ready")

    # A terminating endpoint leaves rotation at once while a ready one is left.
    ferryman.write("svc", _slices("app", a=(old1, READY), b=(old2, DRAINING)))
    eventually(lambda: _answers(ferryman, "drain.test") == {"old1"}, 60, "old2 out")

    # Every pod of the Service is being deleted (a rollout's last old pods, a
    # scale to zero): they still serve, so they answer instead of a 503.
    ferryman.write("svc", _slices("app", a=(old1, DRAINING), b=(old2, DRAINING)))
    eventually(
        lambda: _answers(ferryman, "drain.test") == {"old1", "old2"}, 60, "draining ones used"
    )

    # One stops serving: only the other is left.
    ferryman.write("svc", _slices("app", a=(old1, GONE), b=(old2, DRAINING)))
    eventually(lambda: _answers(ferryman, "drain.test") == {"old2"}, 60, "old1 out")

    # A ready one arrives: the terminating ones leave rotation.
    ferryman.write("svc", _slices("app", b=(old2, DRAINING), c=(new, READY)))
    eventually(lambda: _answers(ferryman, "drain.test") == {"new"}, 60, "new only")

    # Nothing serves: 503, as before.
    ferryman.write("svc", _slices("app", a=(old1, GONE), b=(old2, GONE)))
    eventually(lambda: _answers(ferryman, "drain.test") == {"503"}, 60, "503")


GRACE = 3.0


def test_shutdown_grace_period_keeps_serving_new_connections_then_drains(
    ferryman: Ferryman, backends: Backends
) -> None:
    ferryman.extra_args += ["--shutdown-grace-period", str(GRACE)]
    app, successor = backends.start("app"), backends.start("successor")
    ferryman.write("svc", _slices("app", a=(app, READY)))
    ferryman.write("ing", ingress("r", [rule("grace.test", path("/", "app"))]))
    ferryman.start()
    assert ferryman.proc is not None
    ready_url = f"http://127.0.0.1:{ferryman.ready_port}/nginx-ready"
    base = f"http://127.0.0.1:{ferryman.http_port}"
    slow: dict[str, Any] = {}

    def slow_request() -> None:
        # Still in flight when the grace period ends and NGINX closes its listeners.
        url = f"{base}/?delay={GRACE + 1}"
        try:
            r = httpx.get(url, headers={"Host": "grace.test"}, timeout=30)
            slow.update(status=r.status_code, by=r.json().get("name"), at=time.monotonic())
        except httpx.HTTPError as e:
            slow.update(error=repr(e))

    load = NewConnections(ferryman.http_port, "grace.test")
    try:
        eventually(lambda: any(o == "app" for _, o in load.outcomes), 60, "load answered")
        signalled = time.monotonic()
        ferryman.proc.send_signal(signal.SIGTERM)
        try:
            readiness = str(httpx.get(ready_url, timeout=5).status_code)
        except httpx.HTTPError as e:
            readiness = repr(e)
        not_ready_after = time.monotonic() - signalled
        # Backends keep changing during the grace period; the change still applies.
        ferryman.write("svc", _slices("app", b=(successor, READY)))
        time.sleep(1.0)
        slow_thread = threading.Thread(target=slow_request)
        slow_thread.start()
        code = ferryman.proc.wait(GRACE + 20)
        exited = time.monotonic()
        slow_thread.join(30)
    finally:
        outcomes = load.stop()
    after = signalled - load.t0
    grace = [o for t, o in outcomes if after <= t < after + GRACE - 0.5]
    print(f"readiness 503 after {not_ready_after:.3f}s; exit after {exited - signalled:.2f}s")
    print(f"outcomes in the grace period: {sorted(set(grace))} ({len(grace)} requests)")
    assert grace and set(grace) <= {"app", "successor"}, f"refused or failed: {set(grace)}"
    assert readiness == "503" and not_ready_after < 1.0, readiness
    assert "successor" in grace, "the endpoint change in the grace period was not applied"
    assert code == 0, ferryman.logs()
    # Once the period is over, NGINX's listeners close; the slow request, in flight
    # then, still finishes.
    refused = [t for t, o in outcomes if o == "ConnectionRefusedError"]
    assert refused and min(refused) >= after + GRACE - 0.5, refused[:3]
    assert slow.get("status") == 200, slow
    # Angie's resolver may still hold the old peer for its TTL of 1 s: either backend.
    assert slow["by"] in ("app", "successor")
    assert slow["at"] - load.t0 > min(refused), "the slow request ended before the close"


def test_a_second_signal_ends_the_grace_period(ferryman: Ferryman, backends: Backends) -> None:
    ferryman.extra_args += ["--shutdown-grace-period", "60"]
    ferryman.write("svc", _slices("app", a=(backends.start("app"), READY)))
    ferryman.start()
    assert ferryman.proc is not None
    started = time.monotonic()
    ferryman.proc.send_signal(signal.SIGTERM)
    eventually(lambda: "still serving for the grace period" in ferryman.logs(), 60, "draining")
    ferryman.proc.send_signal(signal.SIGINT)
    assert ferryman.proc.wait(20) == 0
    assert time.monotonic() - started < 20
    assert "grace period cut short" in ferryman.logs()
