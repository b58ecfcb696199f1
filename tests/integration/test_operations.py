"""Operator surfaces: NGINX's own counters, the status port, the health URI."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from testkit.harness import (
    Backends,
    BrokenBackend,
    Ferryman,
    eventually,
    free_port,
    ingress,
    path,
    rule,
    served_by,
    service_with_backends,
)

pytestmark = pytest.mark.flavours("nginx", "nginx-1.30", "angie")


def _app(ferryman: Ferryman, backends: Backends) -> None:
    ferryman.write("svc", service_with_backends("app", [backends.start("app")]))
    ferryman.write("ing", ingress("ops", [rule("ops.test", path("/", "app"))]))


def test_stub_status_numbers_move_with_traffic(ferryman: Ferryman, backends: Backends) -> None:
    _app(ferryman, backends)
    ferryman.start()
    before = ferryman.metrics()
    assert before["nginx_ingress_nginx_up"] == 1
    for i in range(10):
        assert served_by(ferryman, "ops.test", f"/{i}") == "app"
    after = ferryman.metrics()
    # Our 10 requests, plus what the scrapes ask NGINX after the first reading:
    # the first one's fast-path counts and in-flight reading (stub_status and
    # /in-flight), the second one's stub_status.
    assert (
        after["nginx_ingress_nginx_http_requests_total"]
        - before["nginx_ingress_nginx_http_requests_total"]
        == 14
    )
    assert after["nginx_ingress_nginx_connections_accepted"] >= 10
    assert after["nginx_ingress_nginx_connections_handled"] >= 10
    assert "nginx_ingress_nginx_connections_active" in after


def test_status_port_serves_stub_status_to_allowed_networks(
    tmp_path: Path, backends: Backends
) -> None:
    port = free_port()
    allowed = Ferryman(tmp_path / "a", extra_args=["--nginx-status-port", str(port)])
    _app(allowed, backends)
    allowed.start()
    try:
        r = httpx.get(f"http://127.0.0.1:{port}/stub_status", timeout=5)
        assert r.status_code == 200
        assert r.text.startswith("Active connections:")
    finally:
        allowed.stop()
    port = free_port()
    denied = Ferryman(
        tmp_path / "d",
        extra_args=["--nginx-status-port", str(port), "--nginx-status-allow-cidrs", "10.0.0.0/8"],
    )
    _app(denied, backends)
    denied.start()
    try:
        assert httpx.get(f"http://127.0.0.1:{port}/stub_status", timeout=5).status_code == 403
    finally:
        denied.stop()


def test_health_status_answers_for_unrouted_hosts(tmp_path: Path, backends: Backends) -> None:
    f = Ferryman(tmp_path, extra_args=["--health-status"])
    _app(f, backends)
    f.start()
    try:
        r = f.get("10.0.0.1", "/nginx-health")
        assert r.status == 200
        assert r.text == "healthy\n"
        assert served_by(f, "ops.test", "/nginx-health") == "app"  # routed hosts are theirs
        assert f.get("10.0.0.1", "/other").status == 404
    finally:
        f.stop()


def test_health_status_is_off_by_default(ferryman: Ferryman, backends: Backends) -> None:
    _app(ferryman, backends)
    ferryman.start()
    assert ferryman.get("10.0.0.1", "/nginx-health").status == 404


def test_latency_histogram_counts_every_proxied_request(tmp_path: Path, backends: Backends) -> None:
    f = Ferryman(tmp_path, extra_args=["--enable-latency-metrics"])
    _app(f, backends)
    f.start()
    try:
        for i in range(7):
            assert served_by(f, "ops.test", f"/slow{i}?delay=0.02") == "app"
        assert f.get("ops.test-unknown", "/").status == 404  # not proxied: not counted
        series = "nginx_ingress_controller_upstream_server_response_latency_ms_count"

        def counted() -> float:
            m = f.metrics()
            return sum(v for k, v in m.items() if k.startswith(series))

        assert eventually(lambda: counted() == 7, 60, "7 latency samples")
        m = f.metrics()
        key = next(k for k in m if k.startswith(series))
        assert 'resource_name="ops"' in key and 'upstream="default/app:80"' in key
        assert 'code="200"' in key and 'service="app"' in key
        assert 'pod_name="app-app"' in key  # the endpoint's targetRef, as NIC labels it
        total = next(
            v
            for k, v in m.items()
            if k.startswith("nginx_ingress_controller_upstream_server_response_latency_ms_sum")
        )
        assert total >= 7 * 20  # each request waited 20 ms in the backend
    finally:
        f.stop()


def test_upstream_failures_nginx_retried_are_warnings_not_errors(
    ferryman: Ferryman, backends: Backends
) -> None:
    good, broken = backends.start("good"), BrokenBackend()
    ferryman.write("svc", service_with_backends("app", [good, broken]))
    ferryman.write("ing", ingress("ops", [rule("ops.test", path("/", "app"))]))
    ferryman.start()
    try:
        assert [served_by(ferryman, "ops.test", f"/r{i}") for i in range(4)] == ["good"] * 4
        assert broken.accepted == 1
        # NGINX's line about the failed attempt, mirrored into ferryman's log.
        line = eventually(
            lambda: next(
                (
                    entry
                    for entry in ferryman.logs().splitlines()
                    if "logger=ferryman.nginx.errorlog" in entry and "from upstream" in entry
                ),
                None,
            ),
            60,
            "NGINX's upstream error line",
        )
        assert "level=warning" in line, line
        assert "[error]" in line  # NGINX's own level stays in the text
        assert "level=error" not in ferryman.logs()
    finally:
        broken.close()
