"""ferryman.configs.endpoints.resolve_peers: which addresses a backend routes to."""

from __future__ import annotations

from typing import Any

from ferryman.configs.endpoints import Peer, port_ref_of, resolve_peers
from ferryman.resources.service import EndpointSlice, Service, parse_endpoint_slice, parse_service


def service(*ports: tuple[str | None, int]) -> Service:
    raw_ports: list[dict[str, Any]] = []
    for name, port in ports:
        p: dict[str, Any] = {"port": port, "targetPort": port + 8000}
        if name is not None:
            p["name"] = name
        raw_ports.append(p)
    return parse_service(
        {
            "kind": "Service",
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"ports": raw_ports},
        }
    )


def endpoint(*addresses: str, ready: bool | None = None) -> dict[str, Any]:
    e: dict[str, Any] = {"addresses": list(addresses)}
    if ready is not None:
        e["conditions"] = {"ready": ready}
    return e


def slice_(
    name: str,
    ports: list[tuple[str | None, int]],
    endpoints: list[dict[str, Any]],
    address_type: str = "IPv4",
) -> EndpointSlice:
    raw_ports = [{"port": n, **({"name": p} if p is not None else {})} for p, n in ports]
    return parse_endpoint_slice(
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": name,
                "namespace": "ns",
                "labels": {"kubernetes.io/service-name": "web"},
            },
            "addressType": address_type,
            "ports": raw_ports,
            "endpoints": endpoints,
        }
    )


TWO_PORTS = service(("http", 80), ("metrics", 9090))
TWO_PORT_SLICE = slice_("web-1", [("http", 8080), ("metrics", 19090)], [endpoint("10.0.0.1")])


def test_port_by_number_selects_the_service_port_then_its_target() -> None:
    assert resolve_peers(TWO_PORTS, [TWO_PORT_SLICE], 80) == (Peer("10.0.0.1", 8080),)
    assert resolve_peers(TWO_PORTS, [TWO_PORT_SLICE], 9090) == (Peer("10.0.0.1", 19090),)


def test_port_by_name() -> None:
    assert resolve_peers(TWO_PORTS, [TWO_PORT_SLICE], "http") == (Peer("10.0.0.1", 8080),)
    assert resolve_peers(TWO_PORTS, [TWO_PORT_SLICE], "metrics") == (Peer("10.0.0.1", 19090),)


def test_unknown_service_port_has_no_peers() -> None:
    assert resolve_peers(TWO_PORTS, [TWO_PORT_SLICE], 8080) == ()  # a target port, not a port
    assert resolve_peers(TWO_PORTS, [TWO_PORT_SLICE], "grpc") == ()


def test_unnamed_single_port_service() -> None:
    svc = service((None, 80))
    sl = slice_("web-1", [(None, 8080)], [endpoint("10.0.0.1", "10.0.0.2")])
    assert resolve_peers(svc, [sl], 80) == (Peer("10.0.0.1", 8080), Peer("10.0.0.2", 8080))


def test_slice_without_the_port_contributes_nothing() -> None:
    sl = slice_("web-1", [("metrics", 19090)], [endpoint("10.0.0.1")])
    assert resolve_peers(TWO_PORTS, [sl], "http") == ()


def test_not_ready_endpoints_are_excluded_and_unset_means_ready() -> None:
    sl = slice_(
        "web-1",
        [("http", 8080)],
        [
            endpoint("10.0.0.1"),  # no conditions at all
            {"addresses": ["10.0.0.2"], "conditions": {}},  # ready unset
            endpoint("10.0.0.3", ready=True),
            endpoint("10.0.0.4", ready=False),
        ],
    )
    assert resolve_peers(TWO_PORTS, [sl], 80) == (
        Peer("10.0.0.1", 8080),
        Peer("10.0.0.2", 8080),
        Peer("10.0.0.3", 8080),
    )


def test_missing_service_has_no_peers() -> None:
    assert resolve_peers(None, [TWO_PORT_SLICE], 80) == ()


def test_no_slices_no_peers() -> None:
    assert resolve_peers(TWO_PORTS, [], 80) == ()


def test_several_slices_are_merged_sorted_and_deduplicated() -> None:
    s1 = slice_("web-1", [("http", 8080)], [endpoint("10.0.0.2"), endpoint("10.0.0.1")])
    s2 = slice_("web-2", [("http", 8080)], [endpoint("10.0.0.3"), endpoint("10.0.0.1")])
    assert resolve_peers(TWO_PORTS, [s2, s1], "http") == (
        Peer("10.0.0.1", 8080),
        Peer("10.0.0.2", 8080),
        Peer("10.0.0.3", 8080),
    )


def test_slices_may_disagree_on_the_target_port() -> None:
    # During a rollout that changes targetPort, slices carry different numbers.
    s1 = slice_("web-1", [("http", 8080)], [endpoint("10.0.0.1")])
    s2 = slice_("web-2", [("http", 8081)], [endpoint("10.0.0.2")])
    assert resolve_peers(TWO_PORTS, [s1, s2], 80) == (
        Peer("10.0.0.1", 8080),
        Peer("10.0.0.2", 8081),
    )


def test_ipv6_is_used_and_fqdn_ignored() -> None:
    v6 = slice_("web-v6", [("http", 8080)], [endpoint("fd00::1")], address_type="IPv6")
    fqdn = slice_("web-fqdn", [("http", 8080)], [endpoint("db.example.com")], address_type="FQDN")
    assert resolve_peers(TWO_PORTS, [v6, fqdn], 80) == (Peer("fd00::1", 8080),)


def test_port_ref_of_backend_key_text() -> None:
    assert port_ref_of("80") == 80
    assert port_ref_of("http") == "http"
