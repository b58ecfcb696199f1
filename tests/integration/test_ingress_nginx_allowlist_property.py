"""limit-allowlist exempts exactly the clients Python's ``ipaddress`` puts in
one of its networks (host bits masked, plain addresses as /32), through real
NGINX (ferryman_policy_rate.lua and ferryman_policy_access.lua's matcher).

Hypothesis draws allow lists inside 127.0.0.0/8 (prefixes 0-32) and clients
bound to loopback addresses; with limit-rpm 1 and a burst of 1, an exempt
client is served three times in a row, any other is refused by the third
request at the latest. One ferryman serves every example; each waits for a
marker path of the Ingress (404 until its edit is live)."""

from __future__ import annotations

import ipaddress
import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    ingress,
    path,
    rule,
    service_with_backends,
    status_from,
)

HOST = "allow.example.com"
P = "nginx.ingress.kubernetes.io/"
_markers = itertools.count()

_address = st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(1, 4)).map(
    lambda t: f"127.{t[0]}.{t[1]}.{t[2]}"
)
_network = st.tuples(_address, st.integers(0, 32)).map(
    lambda t: t[0] if t[1] == 32 and t[0].endswith("1") else f"{t[0]}/{t[1]}"
)


def exempt(networks: list[str], client: str) -> bool:
    return any(
        ipaddress.ip_address(client) in ipaddress.ip_network(n, strict=False) for n in networks
    )


def manifest(networks: list[str], marker: str) -> dict[str, Any]:
    annotations = {
        P + "limit-rpm": "1",
        P + "limit-burst-multiplier": "1",
        P + "limit-allowlist": ",".join(networks),
    }
    paths = [path("/r", "a"), path(marker, "a", "Exact")]
    return ingress("allow", [rule(HOST, *paths)], annotations=annotations)


def answer(ferryman: Ferryman, client: str, p: str) -> int:
    return status_from(ferryman, client, HOST, p)


@pytest.fixture
def served(ferryman: Ferryman, backends: Backends) -> Iterator[Ferryman]:
    ferryman.write("svc", service_with_backends("a", [backends.start("a")]))
    ferryman.start()
    yield ferryman


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    networks=st.lists(_network, min_size=1, max_size=6),
    clients=st.lists(_address, min_size=1, max_size=4, unique=True),
)
def test_the_allow_list_exempts_as_ipaddress_reads_it(
    served: Ferryman, networks: list[str], clients: list[str]
) -> None:
    marker = f"/marker-{next(_markers)}"
    seen = len(served.events_for("allow"))
    served.write("doc", manifest(networks, marker))
    # Live once its Event says so (sent once every worker has the push) and the
    # marker is routed (the client 127.0.0.1 may be limited: 503).
    eventually(lambda: len(served.events_for("allow")) > seen, 60, "the edit's Event")
    eventually(lambda: answer(served, "127.0.0.1", marker) != 404, 60, f"{marker} live")
    wrong = []
    for client in clients:
        statuses = [answer(served, client, "/r") for _ in range(3)]
        want_exempt = exempt(networks, client)
        if want_exempt != (statuses == [200, 200, 200]) or not set(statuses) <= {200, 503}:
            wrong.append((client, networks, want_exempt, statuses))
    assert not wrong, f"(client, allow list, exempt by ipaddress, NGINX's answers) {wrong}"
    assert served.reloads() == 1
