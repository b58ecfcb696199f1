"""Readings of requests in flight (dataplane/in_flight.py): the answers of
ferryman.lua's GET /in-flight and of Angie's /status/http/, the sum a drain asks
for, the fake data plane, and the /metrics gauges."""

from __future__ import annotations

import asyncio
import ipaddress
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferryman.dataplane.fake import FakeDataPlane
from ferryman.dataplane.in_flight import (
    InFlight,
    InFlightReader,
    host_of,
    parse_peer_counts,
)
from ferryman.observability.metrics import Metrics


def test_the_push_sockets_answer() -> None:
    text = "measured\n10.0.0.1:8080 3\n[fd00::1]:80 1\n10.0.0.2:80 0\n"
    assert parse_peer_counts(text) == {"10.0.0.1:8080": 3, "[fd00::1]:80": 1}
    assert parse_peer_counts("measured\n") == {}
    assert parse_peer_counts("unmeasured\n") is None


@pytest.mark.parametrize("text", ["", "404 Not Found", "measured\n10.0.0.1:80 x", "measured\n3"])
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_peer_counts(text)


def test_to_sums_the_peers_at_the_addresses_whatever_their_port() -> None:
    peers = {"10.0.0.1:8080": 3, "10.0.0.1:9090": 2, "10.0.0.2:80": 5, "[fd00::1]:80": 7}
    reading = InFlight(peers)
    assert reading.to(["10.0.0.1"]) == 5
    assert reading.to(["10.0.0.1", "fd00:0:0::1"]) == 12
    assert reading.to(["10.0.0.3"]) == 0
    assert reading.to([]) == 0


@given(st.ip_addresses(), st.integers(1, 65535), st.integers(1, 10**6))
def test_any_address_is_found_by_any_spelling(
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address, port: int, n: int
) -> None:
    # As NGINX names peers ($upstream_addr): IPv6 in brackets, compressed.
    name = f"[{ip.compressed}]:{port}" if ip.version == 6 else f"{ip}:{port}"
    assert host_of(name) == ip.compressed
    reading = InFlight({name: n})
    assert reading.to([ip.exploded]) == n
    assert reading.to([str(ip)]) == n


def test_the_fake_data_plane_answers_what_a_test_set() -> None:
    fake = FakeDataPlane()
    assert asyncio.run(fake.in_flight()) == InFlight({}, 0, True)
    fake.in_flight_reading = InFlight({"10.0.0.1:80": 1}, 4, True)
    assert asyncio.run(fake.in_flight()).to(["10.0.0.1"]) == 1


def _samples(metrics: Metrics) -> dict[str, float]:
    """The in-flight samples, without NIC's constant ``class`` label."""
    out = {}
    for line in metrics.exposition().decode().splitlines():
        if line.startswith("ferryman_") and "_in_flight" in line:
            name, _, value = line.rpartition(" ")
            name = re.sub(r'class="[^"]*",?', "", name).replace(",}", "}").replace("{}", "")
            out[name] = float(value)
    return out


def test_the_gauges_hold_the_last_reading_only() -> None:
    measured = "ferryman_upstream_server_requests_in_flight_measured"
    metrics = Metrics()
    metrics.in_flight.reading = ({"10.0.0.1:80": 2, "10.0.0.2:80": 1}, 3, True)
    assert _samples(metrics) == {
        "ferryman_requests_in_flight": 3,
        'ferryman_upstream_server_requests_in_flight{server="10.0.0.1:80"}': 2,
        'ferryman_upstream_server_requests_in_flight{server="10.0.0.2:80"}': 1,
        measured: 1,
    }
    metrics.in_flight.reading = ({"10.0.0.2:80": 1}, 1, True)
    assert _samples(metrics) == {
        "ferryman_requests_in_flight": 1,
        'ferryman_upstream_server_requests_in_flight{server="10.0.0.2:80"}': 1,
        measured: 1,
    }
    # Not measured: no peer series at all, rather than zeros.
    metrics.in_flight.reading = ({}, 1, False)
    assert _samples(metrics) == {"ferryman_requests_in_flight": 1, measured: 0}
    # No reading (the data plane did not answer): nothing.
    metrics.in_flight.reading = None
    assert _samples(metrics) == {}


def test_every_data_plane_reads_requests_in_flight() -> None:
    """The interface other code calls (mypy checks the list's type)."""
    from ferryman.dataplane.nginx import NginxManager

    readers: list[type[InFlightReader]] = [NginxManager, FakeDataPlane]
    assert all(callable(getattr(r, "in_flight", None)) for r in readers)
