"""NGINX enforces accessControl Policies as Python's ``ipaddress`` reads NGINX's
rules: allow lists (then "deny all"), deny lists (then "allow all"), host bits
masked, plain addresses as /32.

Hypothesis draws routes, each with its own Policy of networks inside 127.0.0.0/8
(prefixes 0-32, so that clients on the loopback match some and miss others) and
clients bound to loopback addresses; every answer (the backend, or 403) must be
the reference's. One ferryman serves every example; each waits for a marker."""

from __future__ import annotations

import ipaddress
import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testkit.harness import Backends, Ferryman, eventually, service_with_backends, status_from
from testkit.vs_policies import policy

HOST = "access.example.com"
_markers = itertools.count()

_address = st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(1, 4)).map(
    lambda t: f"127.{t[0]}.{t[1]}.{t[2]}"
)
_network = st.tuples(_address, st.integers(0, 32)).map(
    lambda t: t[0] if t[1] == 32 and t[0].endswith("1") else f"{t[0]}/{t[1]}"
)
_rule = st.tuples(st.sampled_from(["allow", "deny"]), st.lists(_network, min_size=1, max_size=4))


def allowed(action: str, networks: list[str], client: str) -> bool:
    inside = any(
        ipaddress.ip_address(client) in ipaddress.ip_network(n, strict=False) for n in networks
    )
    return inside if action == "allow" else not inside


def manifests(rules: list[tuple[str, list[str]]], marker: str) -> list[dict[str, Any]]:
    docs = [policy(f"p{i}", accessControl={a: nets}) for i, (a, nets) in enumerate(rules)]
    routes = [
        {"path": f"/r{i}", "action": {"pass": "a"}, "policies": [{"name": f"p{i}"}]}
        for i in range(len(rules))
    ]
    routes.append({"path": f"={marker}", "action": {"pass": "a"}})
    docs.append(
        {
            "apiVersion": "k8s.nginx.org/v1",
            "kind": "VirtualServer",
            "metadata": {"name": "access", "namespace": "default"},
            "spec": {
                "host": HOST,
                "upstreams": [{"name": "a", "service": "a", "port": 80}],
                "routes": routes,
            },
        }
    )
    return docs


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
    rules=st.lists(_rule, min_size=1, max_size=12),
    clients=st.lists(_address, min_size=1, max_size=4, unique=True),
)
def test_access_control_matches_ipaddress(
    served: Ferryman, rules: list[tuple[str, list[str]]], clients: list[str]
) -> None:
    marker = f"/marker-{next(_markers)}"
    served.write("docs", manifests(rules, marker))
    eventually(lambda: answer(served, "127.0.0.1", marker) == 200, 60, f"{marker} live")
    wrong = []
    for client in clients:
        for i, (action, networks) in enumerate(rules):
            want = 200 if allowed(action, networks, client) else 403
            got = answer(served, client, f"/r{i}")
            if got != want:
                wrong.append((client, action, networks, want, got))
    assert not wrong, f"(client, action, networks, reference, NGINX) {wrong}"
