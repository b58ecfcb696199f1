"""Latency samples: only what ferryman routes is counted, and series are capped."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ferryman.engine.settings import NginxSettings
from ferryman.observability import latency
from ferryman.observability.latency import LatencyReceiver, parse
from ferryman.observability.metrics import Metrics
from ferryman.resources.meta import ObjectRef
from testkit.controller_kit import Kit
from testkit.harness import ingress, path, rule, service

WEB = ObjectRef("Ingress", "ns", "web")


def line(vhost: str, backend: str, server: str, code: str = "200", seconds: str = "0.010") -> bytes:
    return f"<190>Nov 23 12:00:00 ferryman: {vhost} {backend} {server} {code} {seconds}".encode()


def series(metrics: Metrics) -> dict[tuple[str, str, str], float]:
    """(server, code, resource_name) -> sample count."""
    return {
        (s.labels["server"], s.labels["code"], s.labels["resource_name"]): s.value
        for family in metrics.registry.collect()
        for s in family.samples
        if s.name.endswith("latency_ms_count")
    }


def dropped(metrics: Metrics, reason: str) -> float:
    value = metrics.registry.get_sample_value(
        "ferryman_latency_samples_dropped_total", {"reason": reason}
    )
    return value or 0.0


class Routes:
    """What the controller answers: one host, one backend, its peers."""

    def __init__(self, peers: set[str]) -> None:
        self.peers = peers

    def owner_of(self, host: str, backend: str, server: str) -> ObjectRef | None:
        if host == "a.example.com" and backend == "ns/web:80" and server in self.peers:
            return WEB
        return None


def receiver(routes: Routes, max_series: int = 100) -> tuple[LatencyReceiver, Metrics]:
    metrics = Metrics()
    return LatencyReceiver(Path("/unused"), metrics, routes.owner_of, max_series), metrics


@pytest.mark.parametrize(
    ("servers", "codes", "times"),
    [
        ("10.0.0.1:80, 10.0.0.2:80", "502, 200", "0.5, 0.012"),
        ("10.0.0.1:80 : 10.0.0.2:80", "404 : 200", "0.5 : 0.012"),  # an internal redirect
    ],
)
def test_the_last_attempt_after_retries_is_measured(servers: str, codes: str, times: str) -> None:
    sample = parse(line("h", "ns/web:80", servers, codes, times))
    assert sample is not None
    assert (sample.server, sample.code, sample.milliseconds) == ("10.0.0.2:80", "200", 12.0)


@pytest.mark.parametrize("code", ["abc", "2000", "-", ""])
def test_a_status_that_is_not_one_is_ignored(code: str) -> None:
    assert parse(line("h", "ns/web:80", "10.0.0.1:80", code)) is None


@pytest.mark.parametrize("seconds", ["nan", "inf", "-1", "-"])
def test_a_time_that_is_not_one_is_ignored(seconds: str) -> None:
    assert parse(line("h", "ns/web:80", "10.0.0.1:80", seconds=seconds)) is None


def test_samples_for_unknown_hosts_backends_or_peers_are_dropped() -> None:
    r, metrics = receiver(Routes({"10.0.0.1:80"}))
    r.datagram_received(line("a.example.com", "ns/web:80", "10.0.0.1:80"), None)
    r.datagram_received(line("forged.example.com", "ns/web:80", "10.0.0.1:80"), None)
    r.datagram_received(line("a.example.com", "ns/other:80", "10.0.0.1:80"), None)
    r.datagram_received(line("a.example.com", "ns/web:80", "10.9.9.9:80"), None)
    assert series(metrics) == {("10.0.0.1:80", "200", "web"): 1}
    assert dropped(metrics, "unknown") == 3


def test_series_are_capped_and_gone_peers_make_room(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(latency.time, "monotonic", lambda: clock[0])
    routes = Routes({f"10.0.0.{i}:80" for i in range(1, 5)})
    r, metrics = receiver(routes, max_series=3)
    for i in range(1, 5):
        r.datagram_received(line("a.example.com", "ns/web:80", f"10.0.0.{i}:80"), None)
    assert len(series(metrics)) == 3
    assert dropped(metrics, "series_limit") == 1
    # Known series still count past the cap.
    r.datagram_received(line("a.example.com", "ns/web:80", "10.0.0.1:80"), None)
    assert series(metrics)[("10.0.0.1:80", "200", "web")] == 2
    # A pod went away: its series goes when room is needed, not before.
    routes.peers.discard("10.0.0.2:80")
    routes.peers.add("10.0.0.5:80")
    clock[0] += latency.PRUNE_INTERVAL
    r.datagram_received(line("a.example.com", "ns/web:80", "10.0.0.5:80"), None)
    assert set(series(metrics)) == {
        ("10.0.0.1:80", "200", "web"),
        ("10.0.0.3:80", "200", "web"),
        ("10.0.0.5:80", "200", "web"),
    }
    # Full of live series: dropped, and no scan again before PRUNE_INTERVAL.
    routes.peers.add("10.0.0.6:80")
    r.datagram_received(line("a.example.com", "ns/web:80", "10.0.0.6:80"), None)
    r.datagram_received(line("a.example.com", "ns/web:80", "10.0.0.6:80"), None)
    assert dropped(metrics, "series_limit") == 3
    assert ("10.0.0.6:80", "200", "web") not in series(metrics)


def test_the_controller_knows_its_hosts_backends_and_peers(tmp_path: Path) -> None:
    kit = Kit(tmp_path)
    kit.add(
        ingress("web", [rule("a.example.com", path("/", "web"))]),
        *service("web"),
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": "web-1",
                "namespace": "default",
                "labels": {"kubernetes.io/service-name": "web"},
            },
            "addressType": "IPv6",
            "ports": [{"port": 8080}],
            "endpoints": [{"addresses": ["fd00::1"], "conditions": {"ready": True}}],
        },
    )
    asyncio.run(kit.drain())
    owner = kit.controller.latency_owner
    assert owner("a.example.com", "default/web:80", "[fd00::1]:8080") == ObjectRef(
        "Ingress", "default", "web"
    )
    assert owner("b.example.com", "default/web:80", "[fd00::1]:8080") is None
    assert owner("a.example.com", "default/other:80", "[fd00::1]:8080") is None
    assert owner("a.example.com", "default/web:80", "[fd00::2]:8080") is None
    assert owner("a.example.com", "default/web:80", "[fd00::1]:8081") is None


def test_pod_name_is_the_endpoints_pod() -> None:
    """NIC's pod_name label: the pod behind the peer that answered."""
    metrics = Metrics()
    pods = {"10.0.0.5:80": "web-7d9c-abcde"}
    r = LatencyReceiver(
        Path("/unused"),
        metrics,
        Routes({"10.0.0.5:80", "10.0.0.6:80"}).owner_of,
        pod_of=lambda backend, server: pods.get(server, ""),
    )
    r.datagram_received(line("a.example.com", "ns/web:80", "10.0.0.5:80"), None)
    r.datagram_received(line("a.example.com", "ns/web:80", "10.0.0.6:80"), None)
    got = {
        s.labels["server"]: s.labels["pod_name"]
        for family in metrics.registry.collect()
        for s in family.samples
        if s.name.endswith("latency_ms_count")
    }
    assert got == {"10.0.0.5:80": "web-7d9c-abcde", "10.0.0.6:80": ""}


def test_the_controller_knows_the_pod_of_a_peer(tmp_path: Path) -> None:
    """With latency metrics on, the EndpointSlice's targetRef names the pod of
    each peer; an endpoint whose targetRef is not a Pod has none."""
    kit = Kit(tmp_path, nginx=NginxSettings(latency_metrics=True))
    pod = {"kind": "Pod", "name": "web-0", "namespace": "default", "uid": "u"}
    kit.add(
        ingress("web", [rule("a.example.com", path("/", "web"))]),
        *service("web"),
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": "web-1",
                "namespace": "default",
                "labels": {"kubernetes.io/service-name": "web"},
            },
            "addressType": "IPv6",
            "ports": [{"port": 8080}],
            "endpoints": [
                {"addresses": ["fd00::1"], "targetRef": pod},
                {"addresses": ["fd00::2"], "targetRef": {"kind": "Node", "name": "n"}},
            ],
        },
    )
    asyncio.run(kit.drain())
    pod_of = kit.controller.latency_pod
    assert pod_of("default/web:80", "[fd00::1]:8080") == "web-0"
    assert pod_of("default/web:80", "[fd00::2]:8080") == ""
    assert pod_of("default/other:80", "[fd00::1]:8080") == ""
