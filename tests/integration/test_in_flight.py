"""Requests in flight, per peer and per replica, as the data plane measures them:
what a machine's drain waits on (dataplane/in_flight.py), read both as ferryman
reads it and from /metrics."""

from __future__ import annotations

import socket
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from testkit.harness import (
    Backend,
    Backends,
    BrokenBackend,
    Ferryman,
    RemoteBackend,
    eventually,
    free_port,
    in_flight,
    ingress,
    path,
    rule,
    service_with_backends,
    without_fast_module,
)

HOST = "app.example.com"
PEER_GAUGE = "ferryman_upstream_server_requests_in_flight"
REPLICA_GAUGE = "ferryman_requests_in_flight"
MEASURED_GAUGE = "ferryman_upstream_server_requests_in_flight_measured"


def _peer(b: Backend | BrokenBackend | RemoteBackend) -> str:
    return f"127.0.0.1:{b.port}"


@contextmanager
def _held(f: Ferryman, pod: Backend, n: int) -> Iterator[list[int]]:
    """``n`` requests held open at ``pod`` while inside; their statuses after."""
    statuses: list[int] = []

    def send() -> None:
        statuses.append(f.get(HOST, "/x?hold").status)

    threads = [threading.Thread(target=send) for _ in range(n)]
    for t in threads:
        t.start()
    try:
        eventually(lambda: pod.holding == n, 60, f"{n} requests held")
        yield statuses
    finally:
        pod.release()
        for t in threads:
            t.join(15)


def _gauges(f: Ferryman) -> tuple[dict[str, float], float]:
    m = f.metrics()
    peers = {k: v for k, v in m.items() if k.startswith(PEER_GAUGE + "{")}
    return peers, m[REPLICA_GAUGE]


def _ingress(f: Ferryman, *pods: Backend | BrokenBackend | RemoteBackend, **kw: str) -> None:
    f.write("svc", service_with_backends("app", list(pods)))
    f.write("ing", ingress("app", [rule(HOST, path("/", "app"))], annotations=kw or None))


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_requests_held_open_are_in_flight_until_they_end(
    ferryman: Ferryman, backends: Backends
) -> None:
    pod, other = backends.start("pod"), backends.start("other")
    _ingress(ferryman, pod)
    ferryman.start()

    with _held(ferryman, pod, 3) as statuses:
        reading = in_flight(ferryman)
        assert reading.peers_measured
        assert dict(reading.peers) == {_peer(pod): 3}
        assert reading.replica == 3
        assert reading.to(["127.0.0.1"]) == 3
        assert reading.to(["10.0.0.1"]) == 0
        assert eventually(
            lambda: _gauges(ferryman) == ({f'{PEER_GAUGE}{{server="{_peer(pod)}"}}': 3}, 3),
            60,
            "the gauges at 3",
        )
    assert statuses == [200] * 3

    eventually(lambda: in_flight(ferryman).replica == 0, 60, "replica drained")
    reading = in_flight(ferryman)
    assert (dict(reading.peers), reading.peers_measured) == ({}, True)
    # The peer's series ends with its last request.
    assert eventually(lambda: _gauges(ferryman) == ({}, 0), 60, "the gauges at 0")
    assert other.hits == 0


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_failed_attempts_before_a_good_peer_leave_nothing_counted(
    ferryman: Ferryman, backends: Backends
) -> None:
    """Each request starts at a peer that refuses the connection or one that
    closes it unanswered half of the time, then retries at the good one: every
    attempt's count ends with the attempt (the balancer's get and free pair)."""
    pod = backends.start("pod")
    broken = BrokenBackend()
    refused = RemoteBackend("refused", "127.0.0.1", free_port(), None)  # type: ignore[arg-type]
    # Never skipped as down: every rotation through them tries them again.
    _ingress(ferryman, pod, broken, refused, **{"nginx.org/max-fails": "0"})
    ferryman.start()
    try:
        with _held(ferryman, pod, 6):
            reading = in_flight(ferryman)
            assert dict(reading.peers) == {_peer(pod): 6}
            assert reading.replica == 6
        assert broken.accepted > 0  # the failing peers were tried
        eventually(lambda: in_flight(ferryman).replica == 0, 60, "replica drained")
        assert dict(in_flight(ferryman).peers) == {}
    finally:
        broken.close()


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_a_client_that_goes_away_leaves_nothing_in_flight(
    ferryman: Ferryman, backends: Backends
) -> None:
    pod = backends.start("pod")
    _ingress(ferryman, pod)
    ferryman.start()
    client = socket.create_connection(("127.0.0.1", ferryman.http_port))
    try:
        client.sendall(f"GET /x?hold HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
        eventually(lambda: pod.holding == 1, 60, "the request held")
        assert dict(in_flight(ferryman).peers) == {_peer(pod): 1}
        client.close()
        # NGINX ends the request (499) while the backend still holds its end.
        eventually(lambda: in_flight(ferryman).replica == 0, 60, "replica drained")
        assert dict(in_flight(ferryman).peers) == {}
        assert pod.holding == 1
    finally:
        client.close()
        pod.release()


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_a_peer_that_left_its_endpoint_set_is_counted_until_its_requests_end(
    ferryman: Ferryman, backends: Backends
) -> None:
    """The drain's order: the endpoint leaves rotation, then its requests end;
    the module still names the peer until they have, on every server."""
    pod, other = backends.start("pod"), backends.start("other")
    _ingress(ferryman, pod)
    ferryman.start()
    with _held(ferryman, pod, 2):
        _ingress(ferryman, other)
        eventually(lambda: ferryman.get(HOST, "/").served_by == "other", 60, "pod out")
        # The last of those requests is answered before NGINX frees it (and
        # Writing counts it until then): under load the first reading can
        # still include it, an over-count, which is the safe side.
        eventually(lambda: ferryman.metrics()[REPLICA_GAUGE] == 2, 60, "2 through the replica")
        m = ferryman.metrics()
        reading = in_flight(ferryman)
        assert dict(reading.peers) == {_peer(pod): 2}
        assert reading.to(["127.0.0.1"]) == 2
        assert m[f'{PEER_GAUGE}{{server="{_peer(pod)}"}}'] == 2
        assert m[MEASURED_GAUGE] == 1
    assert eventually(lambda: _gauges(ferryman) == ({}, 0), 60, "the gauges at 0")


def test_without_the_module_peers_are_not_measured(
    ferryman: Ferryman, backends: Backends, tmp_path: Path
) -> None:
    """The Lua fast path does not count per peer: the reading says so, rather
    than zeros a drain would take for "drained"; the replica is still counted."""
    ferryman.extra_args += without_fast_module(tmp_path)
    pod = backends.start("pod")
    _ingress(ferryman, pod)
    ferryman.start()
    with _held(ferryman, pod, 2):
        reading = in_flight(ferryman)
        assert (reading.peers_measured, dict(reading.peers), reading.replica) == (False, {}, 2)
        assert _gauges(ferryman) == ({}, 2)
        assert ferryman.metrics()[MEASURED_GAUGE] == 0


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_ipv6_peers_are_named_as_upstream_addr_names_them(
    ferryman: Ferryman, backends: Backends
) -> None:
    pod = backends.start("v6", "::1")
    docs = service_with_backends("app", [pod])  # an IPv6 EndpointSlice
    docs[-1]["endpoints"][0]["addresses"] = ["0:0::1"]  # spelled otherwise than NGINX does
    ferryman.write("svc", docs)
    ferryman.write("ing", ingress("app", [rule(HOST, path("/", "app"))]))
    ferryman.start()
    with _held(ferryman, pod, 1):
        reading = in_flight(ferryman)
        assert dict(reading.peers) == {f"[::1]:{pod.port}": 1}
        assert reading.to(["::1"]) == reading.to(["0:0:0:0:0:0:0:1"]) == 1


def test_a_full_bucket_counts_too_high_never_too_low(
    ferryman: Ferryman, backends: Backends
) -> None:
    """Nine peers whose names share one of the module's buckets (8 slots, picked
    by the name's CRC-32, as NGINX's ngx_crc32_short computes it), each with a
    request in flight: the ninth finds no slot and is counted for every peer of
    the table, so counts run high while it lasts, and all go back to 0."""
    port = free_port()
    by_bucket: dict[int, list[str]] = {}
    for i in range(1, 65536):
        address = f"127.0.{i >> 8}.{i & 255}"
        bucket = by_bucket.setdefault(zlib.crc32(f"{address}:{port}".encode()) % 8192, [])
        bucket.append(address)
        if len(bucket) == 9:
            break
    pods = [backends.start(f"pod{i}", address, port) for i, address in enumerate(bucket)]
    ferryman.write("svc", service_with_backends("app", pods))
    ferryman.write("ing", ingress("app", [rule(HOST, path("/", "app"))]))
    ferryman.start()
    statuses: list[int] = []
    threads = [
        threading.Thread(target=lambda: statuses.append(ferryman.get(HOST, "/x?hold").status))
        for _ in pods
    ]
    for t in threads:
        t.start()
    try:
        eventually(lambda: all(p.holding == 1 for p in pods), 60, "one request held per pod")
        reading = in_flight(ferryman)
        assert set(reading.peers) == {f"{a}:{port}" for a in bucket}
        assert sorted(reading.peers.values()) == [1] + [2] * 8
    finally:
        for p in pods:
            p.release()
        for t in threads:
            t.join(15)
    assert statuses == [200] * 9
    eventually(lambda: not in_flight(ferryman).peers, 60, "all back to 0")


def test_counts_return_to_zero_after_concurrent_traffic_with_retries(
    ferryman: Ferryman, backends: Backends
) -> None:
    """Both workers count into the same slots at once (compare-and-swap races),
    failed attempts among them: when the traffic stops, nothing is left."""
    pods = [backends.start(f"pod{i}") for i in range(3)]
    broken = BrokenBackend()
    _ingress(ferryman, *pods, broken, **{"nginx.org/max-fails": "0"})
    ferryman.start()
    statuses: list[int] = []

    def client(n: int) -> None:
        for i in range(n):
            statuses.append(ferryman.get(HOST, f"/x?delay=0.0{i % 3}").status)

    try:
        threads = [threading.Thread(target=client, args=(25,)) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert statuses == [200] * 400
        assert broken.accepted > 0
        eventually(lambda: in_flight(ferryman).replica == 0, 60, "replica drained")
        reading = in_flight(ferryman)
        assert (dict(reading.peers), reading.peers_measured) == ({}, True)
    finally:
        broken.close()
