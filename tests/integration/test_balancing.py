"""Load-balancing methods and passive failure handling, per NIC's annotations."""

from __future__ import annotations

import threading

import pytest

from testkit.harness import (
    Backends,
    BrokenBackend,
    Ferryman,
    ingress,
    path,
    rule,
    served_by,
    service_with_backends,
)

pytestmark = pytest.mark.flavours("nginx", "nginx-1.30", "angie")

HOST = "lb.example.com"


def _ingress(annotations: dict[str, str] | None = None) -> dict[str, object]:
    return ingress("lb", [rule(HOST, path("/", "app"))], annotations=annotations)


def test_least_conn_avoids_the_busy_endpoint(
    either_fast_path: Ferryman, backends: Backends
) -> None:
    ferryman = either_fast_path
    a, b = backends.start("a"), backends.start("b")
    ferryman.write("svc", service_with_backends("app", [a, b]))
    ferryman.write("ing", _ingress({"nginx.org/lb-method": "least_conn"}))
    ferryman.start()
    slow: list[str | None] = []
    # Long enough to outlast the quick requests on a loaded machine.
    t = threading.Thread(target=lambda: slow.append(served_by(ferryman, HOST, "/s?delay=6")))
    t.start()
    # Wait until the slow request is in flight on one backend.
    while a.hits + b.hits == 0:
        threading.Event().wait(0.01)
    busy = "a" if a.hits else "b"
    quick = {served_by(ferryman, HOST, f"/q{i}") for i in range(6)}
    assert t.is_alive(), "the slow request ended before the quick ones: no load to avoid"
    t.join()
    assert slow == [busy]
    assert quick == {"b" if busy == "a" else "a"}
    # Finished requests leave the count: equal loads again, so both take traffic.
    assert {served_by(ferryman, HOST, f"/after{i}") for i in range(6)} == {"a", "b"}


def test_round_robin_ignores_load(ferryman: Ferryman, backends: Backends) -> None:
    a, b = backends.start("a"), backends.start("b")
    ferryman.write("svc", service_with_backends("app", [a, b]))
    ferryman.write("ing", _ingress())
    ferryman.start()
    t = threading.Thread(target=lambda: served_by(ferryman, HOST, "/s?delay=1.5"))
    t.start()
    quick = [served_by(ferryman, HOST, f"/q{i}") for i in range(6)]
    t.join()
    assert set(quick) == {"a", "b"}


def test_failing_endpoint_is_skipped_for_fail_timeout(
    ferryman: Ferryman, backends: Backends
) -> None:
    good, broken = backends.start("good"), BrokenBackend()
    ferryman.write("svc", service_with_backends("app", [good, broken]))
    ferryman.write("ing", _ingress())
    ferryman.start()
    try:
        results = [served_by(ferryman, HOST, f"/r{i}") for i in range(10)]
        assert results == ["good"] * 10  # the failure was retried on the good peer
        assert broken.accepted == 1  # and then the broken one was left alone
    finally:
        broken.close()


def test_max_fails_zero_keeps_trying_every_endpoint(ferryman: Ferryman, backends: Backends) -> None:
    good, broken = backends.start("good"), BrokenBackend()
    ferryman.write("svc", service_with_backends("app", [good, broken]))
    ferryman.write("ing", _ingress({"nginx.org/max-fails": "0"}))
    ferryman.start()
    try:
        results = [served_by(ferryman, HOST, f"/r{i}") for i in range(10)]
        assert results == ["good"] * 10
        assert broken.accepted >= 4
    finally:
        broken.close()


def test_invalid_balancing_annotations_are_rejected(ferryman: Ferryman, backends: Backends) -> None:
    ferryman.write("svc", service_with_backends("app", [backends.start("a")]))
    ferryman.write("ing", _ingress({"nginx.org/lb-method": "fastest;", "nginx.org/max-fails": "x"}))
    ferryman.start()
    ev = ferryman.events_for("lb")[-1]
    assert ev["reason"] == "Rejected"
    assert "nginx.org/lb-method" in ev["message"]
    assert "nginx.org/max-fails" in ev["message"]


def test_nic_methods_beyond_the_fast_path(ferryman: Ferryman, backends: Backends) -> None:
    """ip_hash and the random methods are served by the slow path's balancer
    (kinds/ingress/records/as_virtualserver.py), on every server."""
    ferryman.write("svc", service_with_backends("app", [backends.start("a")]))
    ferryman.write("ing", _ingress({"nginx.org/lb-method": "ip_hash"}))
    ferryman.start()
    assert served_by(ferryman, HOST, "/") == "a"
    ev = ferryman.events_for("lb")[-1]
    assert ev["reason"] == "AddedOrUpdated"
