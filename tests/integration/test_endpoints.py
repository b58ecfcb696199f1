"""Load balancing over EndpointSlices, pushed to NGINX without reloads."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.integration.harness import (
    Backends,
    Ferryman,
    eventually,
    ingress,
    path,
    rule,
    served_by,
    service,
    service_with_backends,
)

pytestmark = pytest.mark.flavours("nginx", "angie")

HOST = "lb.example.com"


def _ingress(ferryman: Ferryman, port: int | str = 80) -> None:
    ferryman.write("ing", ingress("lb", [rule(HOST, path("/", "app", port=port))]))


def _spread(ferryman: Ferryman, n: int) -> Counter[str | None]:
    return Counter(served_by(ferryman, HOST, f"/r{i}") for i in range(n))


def test_round_robin_spreads_evenly(ferryman: Ferryman, backends: Backends) -> None:
    pods = [backends.start(f"pod{i}") for i in range(3)]
    ferryman.write("svc", service_with_backends("app", pods))
    _ingress(ferryman)
    ferryman.start()
    assert _spread(ferryman, 30) == {"pod0": 10, "pod1": 10, "pod2": 10}


def test_not_ready_endpoints_get_no_traffic(ferryman: Ferryman, backends: Backends) -> None:
    ready, unready = backends.start("ready"), backends.start("unready")
    ferryman.write("svc", service_with_backends("app", [ready, unready], not_ready=(unready,)))
    _ingress(ferryman)
    ferryman.start()
    assert _spread(ferryman, 10) == {"ready": 10}
    assert unready.hits == 0


def test_backend_without_endpoints_answers_503(ferryman: Ferryman, backends: Backends) -> None:
    ferryman.write("svc", service("app"))
    _ingress(ferryman)
    ferryman.start()
    assert ferryman.get(HOST, "/").status == 503


def test_missing_service_answers_503(ferryman: Ferryman) -> None:
    _ingress(ferryman)
    ferryman.start()
    assert ferryman.get(HOST, "/").status == 503


def test_service_port_by_name(ferryman: Ferryman, backends: Backends) -> None:
    pod = backends.start("named")
    ferryman.write("svc", service_with_backends("app", [pod], port=8080, port_name="web"))
    _ingress(ferryman, port="web")
    ferryman.start()
    assert served_by(ferryman, HOST, "/") == "named"


def test_service_port_by_number_maps_to_the_target_port(
    ferryman: Ferryman, backends: Backends
) -> None:
    pod = backends.start("numbered")
    ferryman.write("svc", service_with_backends("app", [pod], port=8080, port_name="web"))
    _ingress(ferryman, port=8080)
    ferryman.start()
    assert served_by(ferryman, HOST, "/") == "numbered"
    # A port the Service does not have routes nowhere.
    _ingress(ferryman, port=9999)
    eventually(lambda: ferryman.get(HOST, "/").status == 503, 3, "unknown port -> 503")


def test_endpoint_changes_need_no_reload(ferryman: Ferryman, backends: Backends) -> None:
    a, b, c = (backends.start(n) for n in "abc")
    ferryman.write("svc", service_with_backends("app", [a]))
    _ingress(ferryman)
    ferryman.start()
    reloads = ferryman.reloads()
    assert served_by(ferryman, HOST, "/") == "a"

    ferryman.write("svc", service_with_backends("app", [a, b]))  # scale up
    # Angie re-resolves its peers from ferryman's DNS within about 2 s.
    eventually(lambda: set(_spread(ferryman, 4)) == {"a", "b"}, 5, "scale-up")
    ferryman.write("svc", service_with_backends("app", [a, b], not_ready=(a,)))  # a not ready
    eventually(lambda: set(_spread(ferryman, 4)) == {"b"}, 5, "not-ready")
    ferryman.write("svc", service_with_backends("app", [c]))  # rollout
    eventually(lambda: set(_spread(ferryman, 4)) == {"c"}, 5, "replace")
    ferryman.write("svc", service("app"))  # scale to zero
    eventually(lambda: ferryman.get(HOST, "/").status == 503, 5, "scale to zero")

    # Angie: N -> 0 turns the locations into 503s, the one reload here.
    assert ferryman.reloads() == reloads + (ferryman.flavour == "angie")
    assert ferryman.metrics()["ferryman_endpoints_pushes_total"] >= 4


def test_dead_endpoint_is_skipped(ferryman: Ferryman, backends: Backends) -> None:
    alive, dead = backends.start("alive"), backends.start("dead")
    ferryman.write("svc", service_with_backends("app", [alive, dead]))
    _ingress(ferryman)
    ferryman.start()
    dead.server.shutdown()
    dead.server.server_close()
    assert _spread(ferryman, 10) == {"alive": 10}


def test_upstream_keepalive_connections_are_reused(ferryman: Ferryman, backends: Backends) -> None:
    pod = backends.start("pod")
    ferryman.write("svc", service_with_backends("app", [pod]))
    _ingress(ferryman)
    ferryman.start()
    for i in range(20):
        assert served_by(ferryman, HOST, f"/k{i}") == "pod"
    # Two NGINX workers may each open their own connection; 20 requests over
    # fresh upstream connections would show 20.
    assert pod.connections <= 4
