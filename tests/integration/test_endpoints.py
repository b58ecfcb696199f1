"""Load balancing over EndpointSlices, pushed to NGINX without reloads."""

from __future__ import annotations

from collections import Counter

import pytest

from testkit.harness import (
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

pytestmark = pytest.mark.flavours("nginx", "nginx-1.30", "angie")

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
    eventually(lambda: ferryman.get(HOST, "/").status == 503, 60, "unknown port -> 503")


def test_endpoint_changes_need_no_reload(ferryman: Ferryman, backends: Backends) -> None:
    a, b, c = (backends.start(n) for n in "abc")
    ferryman.write("svc", service_with_backends("app", [a]))
    _ingress(ferryman)
    ferryman.start()
    reloads = ferryman.reloads()
    assert served_by(ferryman, HOST, "/") == "a"

    ferryman.write("svc", service_with_backends("app", [a, b]))  # scale up
    # Angie re-resolves its peers from ferryman's DNS within about 2 s.
    eventually(lambda: set(_spread(ferryman, 4)) == {"a", "b"}, 60, "scale-up")
    ferryman.write("svc", service_with_backends("app", [a, b], not_ready=(a,)))  # a not ready
    eventually(lambda: set(_spread(ferryman, 4)) == {"b"}, 60, "not-ready")
    ferryman.write("svc", service_with_backends("app", [c]))  # rollout
    eventually(lambda: set(_spread(ferryman, 4)) == {"c"}, 60, "replace")
    ferryman.write("svc", service("app"))  # scale to zero
    eventually(lambda: ferryman.get(HOST, "/").status == 503, 60, "scale to zero")

    assert ferryman.reloads() == reloads
    # Counted once NGINX acknowledged the push, which the traffic may see first.
    pushes = "ferryman_endpoints_pushes_total"
    eventually(lambda: ferryman.metrics()[pushes] >= 4, 60, "the pushes counted")


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


def test_an_address_holding_a_record_cannot_re_point_another_namespaces_host(
    ferryman: Ferryman, backends: Backends
) -> None:
    """A newline in an address once ended the endpoint record and began a host record
    (pushed records are lines of tab-separated fields): the slice re-pointed
    bank.example.com, in another namespace, at its own pod. Addresses are now
    checked against the slice's addressType, and the slice is ignored, with a reason."""
    bank, evil, marker = backends.start("bank"), backends.start("evil"), backends.start("marker")
    ferryman.write("bank", service_with_backends("bank", [bank], namespace="bank"))
    ferryman.write(
        "bank-ing",
        ingress("bank", [rule("bank.example.com", path("/", "bank"))], namespace="bank"),
    )
    ferryman.write(
        "evil-ing",
        ingress(
            "evil",
            [rule("evil.example.com", path("/", "app"), path("/marker", "marker"))],
            namespace="evil",
        ),
    )
    ferryman.write("evil", service("app", namespace="evil"))
    ferryman.start()
    assert served_by(ferryman, "bank.example.com", "/") == "bank"

    hijack = (
        f"127.0.0.1#{evil.port}\n"
        f"H\tbank.example.com\t- 0 evil/app:80 rr:1:10 P|/zz|none"  # "#<port>" lands here
    )
    (inject,) = service_with_backends("app", [evil], namespace="evil")[1:]
    inject["endpoints"][0]["addresses"] = [hijack]
    # The marker Service in the same file: once it serves, the push that would
    # have carried the hijack is in.
    ferryman.write("inject", inject, service_with_backends("marker", [marker], namespace="evil"))
    eventually(lambda: served_by(ferryman, "evil.example.com", "/marker") == "marker", 60, "marker")
    assert [served_by(ferryman, "bank.example.com", f"/r{i}") for i in range(5)] == ["bank"] * 5
    assert ferryman.get("evil.example.com", "/").status == 503  # the slice is not used
    assert "ignoring an invalid object" in ferryman.logs()
    assert "EndpointSlice evil/app-evil" in ferryman.logs()
    assert "is not an IPv4 address" in ferryman.logs()
