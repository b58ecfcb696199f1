"""NGINX enforces rateLimit Policies as ngx_http_limit_req_module counts: a
reference of its lookup and accounting (below, from NGINX 1.22's source) and
the Lua through NGINX answer every request alike.

Hypothesis draws two limits on one route (keys: a header and the URI, bursts
0-3, nodelay) and a sequence of requests over a few users and paths. At 1r/m a
bucket leaks 16 thousandths of a request a second, far less than one request
over an example, so the reference runs with the clock stopped: what it checks is
NGINX's counting (per key, per limit; a request refused by one limit counted by
none; an empty key not limited), not timing. Each example uses a new
VirtualServer, so its buckets (one per Policy and VirtualServer) start empty."""

from __future__ import annotations

import itertools
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testkit.harness import Backends, Ferryman, eventually, service_with_backends
from testkit.vs_policies import policy

_examples = itertools.count()


class LimitReq:
    """ngx_http_limit_req's states with the clock stopped: excess per key, in
    thousandths of a request; burst in the same unit."""

    def __init__(self, burst: int) -> None:
        self.burst = burst * 1000
        self.excess: dict[str, int] = {}

    def lookup(self, key: str) -> tuple[bool, int]:
        """(over burst, the excess this request would leave)."""
        if key not in self.excess:
            return False, 0
        e = self.excess[key] + 1000
        return e > self.burst, e


def passes(limits: list[tuple[LimitReq, str]]) -> bool:
    """The handler: every limit looked up in order (empty keys skipped), the
    first over its burst refuses and nothing is counted; else all are counted."""
    found = []
    for limit, key in limits:
        if key == "":
            continue
        busy, e = limit.lookup(key)
        if busy:
            return False
        found.append((limit, key, e))
    for limit, key, e in found:
        limit.excess[key] = e
    return True


_request = st.tuples(st.sampled_from(["", "ann", "bob"]), st.sampled_from(["/x", "/y"]))


@pytest.fixture
def served(ferryman: Ferryman, backends: Backends) -> Ferryman:
    ferryman.write("svc", service_with_backends("a", [backends.start("a")]))
    ferryman.start()
    return ferryman


def manifests(name: str, bursts: tuple[int, int]) -> list[dict[str, Any]]:
    def limit(pol: str, key: str, burst: int) -> dict[str, Any]:
        fields = {"rate": "1r/m", "key": key, "zoneSize": "1M", "noDelay": True, "burst": burst}
        return policy(pol, rateLimit={k: v for k, v in fields.items() if v != 0})

    return [
        limit("by-user", "${http_x_user}", bursts[0]),
        limit("by-uri", "${uri}", bursts[1]),
        {
            "apiVersion": "k8s.nginx.org/v1",
            "kind": "VirtualServer",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "host": f"{name}.example.com",
                "upstreams": [{"name": "a", "service": "a", "port": 80}],
                "routes": [
                    {
                        "path": "/",
                        "action": {"pass": "a"},
                        "policies": [{"name": "by-user"}, {"name": "by-uri"}],
                    }
                ],
            },
        },
    ]


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    bursts=st.tuples(st.integers(0, 3), st.integers(0, 3)),
    requests=st.lists(_request, min_size=1, max_size=25),
)
def test_rate_limits_count_as_nginx(
    served: Ferryman, bursts: tuple[int, int], requests: list[tuple[str, str]]
) -> None:
    name = f"rl{next(_examples)}"
    host = f"{name}.example.com"
    served.write("docs", manifests(name, bursts))
    base = f"http://127.0.0.1:{served.http_port}"
    with httpx.Client(timeout=10) as c:
        # Live once the host routes (the marker path is limited too: by its own key).
        eventually(
            lambda: (
                c.get(base + "/live", headers={"Host": host, "X-User": "probe"}).status_code != 404
            ),
            60,
            f"{name} live",
        )
        by_user, by_uri = LimitReq(bursts[0]), LimitReq(bursts[1])
        wrong = []
        for user, path in requests:
            want = 200 if passes([(by_user, user), (by_uri, path)]) else 503
            headers = {"Host": host, **({"X-User": user} if user else {})}
            got = c.get(base + path, headers=headers).status_code
            if got != want:
                wrong.append((user, path, want, got))
    assert not wrong, f"bursts={bursts}: (user, path, reference, NGINX) {wrong}"
