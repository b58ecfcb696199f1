"""ferryman.configs.endpoints.resolve_peers: which addresses a backend routes to."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferryman.configs.endpoints import Peer, port_ref_of, resolve_peers
from ferryman.resources.meta import InvalidResource
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


def endpoint(
    *addresses: str,
    ready: bool | None = None,
    serving: bool | None = None,
    terminating: bool | None = None,
) -> dict[str, Any]:
    e: dict[str, Any] = {"addresses": list(addresses)}
    values = {"ready": ready, "serving": serving, "terminating": terminating}
    if conditions := {k: v for k, v in values.items() if v is not None}:
        e["conditions"] = conditions
    return e


def draining(*addresses: str, serving: bool | None = True) -> dict[str, Any]:
    """A terminating endpoint as the EndpointSlice controller writes it."""
    return endpoint(*addresses, ready=False, serving=serving, terminating=True)


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


def test_terminating_endpoints_leave_rotation_while_a_ready_one_is_left() -> None:
    sl = slice_(
        "web-1",
        [("http", 8080)],
        [
            endpoint("10.0.0.1", ready=True),
            draining("10.0.0.2"),
            # publishNotReadyAddresses: the controller keeps terminating pods ready.
            endpoint("10.0.0.3", ready=True, serving=True, terminating=True),
            # Hand-written: conditions unset but terminating.
            endpoint("10.0.0.4", terminating=True),
        ],
    )
    assert resolve_peers(TWO_PORTS, [sl], 80) == (Peer("10.0.0.1", 8080),)


def test_without_a_ready_endpoint_the_serving_terminating_ones_are_used() -> None:
    # A rollout that deleted every old pod before a new one is ready: the old ones
    # still serve while they drain, and kube-proxy sends to them rather than refuse.
    s1 = slice_("web-1", [("http", 8080)], [draining("10.0.0.1"), draining("10.0.0.2")])
    s2 = slice_(
        "web-2",
        [("http", 8080)],
        [
            draining("10.0.0.3", serving=False),  # stopped answering
            endpoint("10.0.0.4", ready=False),  # not ready yet, not terminating
            draining("10.0.0.5", serving=None),  # serving unset: as ready (false)
            endpoint("10.0.0.6", terminating=True),  # conditions unset: serving
        ],
    )
    assert resolve_peers(TWO_PORTS, [s1, s2], 80) == (
        Peer("10.0.0.1", 8080),
        Peer("10.0.0.2", 8080),
        Peer("10.0.0.6", 8080),
    )


def test_the_fallback_is_per_service_port() -> None:
    # kube-proxy decides per Service port: a port whose ready endpoints are in a
    # slice of its own does not take the fallback from the other port.
    ready_http = slice_("web-1", [("http", 8080)], [endpoint("10.0.0.1")])
    draining_metrics = slice_("web-2", [("metrics", 19090)], [draining("10.0.0.2")])
    slices = [ready_http, draining_metrics]
    assert resolve_peers(TWO_PORTS, slices, "http") == (Peer("10.0.0.1", 8080),)
    assert resolve_peers(TWO_PORTS, slices, "metrics") == (Peer("10.0.0.2", 19090),)


_conditions = st.fixed_dictionaries(
    {},
    optional={
        "ready": st.booleans(),
        "serving": st.booleans(),
        "terminating": st.booleans(),
    },
)
_endpoint_lists = st.lists(
    st.builds(
        lambda n, c: {"addresses": [f"10.0.0.{n}"], "conditions": c},
        st.integers(1, 20),
        _conditions,
    ),
    max_size=8,
)


@given(st.lists(_endpoint_lists, max_size=4))
def test_ready_first_else_serving_terminating_never_not_serving(
    slices: list[list[dict[str, Any]]],
) -> None:
    parsed = [slice_(f"web-{i}", [("http", 8080)], eps) for i, eps in enumerate(slices)]
    peers = {p.address for p in resolve_peers(TWO_PORTS, parsed, 80)}
    all_conditions = [e for eps in slices for e in eps]

    def addresses(keep: Callable[[dict[str, Any]], bool]) -> set[str]:
        return {e["addresses"][0] for e in all_conditions if keep(e["conditions"])}

    ready = addresses(lambda c: c.get("ready", True) and not c.get("terminating", False))
    serving_terminating = addresses(
        lambda c: c.get("serving", c.get("ready", True)) and c.get("terminating", False)
    )
    assert peers == (ready or serving_terminating)
    # Never an address whose only endpoints stopped serving.
    not_serving = addresses(lambda c: not c.get("serving", c.get("ready", True)))
    assert not peers & (not_serving - ready - serving_terminating)


@given(
    st.lists(_endpoint_lists, max_size=4),
    st.sets(st.integers(1, 20).map(lambda n: f"10.0.0.{n}"), max_size=20),
)
def test_routable_addresses_count_as_ready_unless_terminating(
    slices: list[list[dict[str, Any]]], routable: set[str]
) -> None:
    parsed = [slice_(f"web-{i}", [("http", 8080)], eps) for i, eps in enumerate(slices)]
    peers = {p.address for p in resolve_peers(TWO_PORTS, parsed, 80, frozenset(routable))}
    ungated = {p.address for p in resolve_peers(TWO_PORTS, parsed, 80)}
    endpoints = [e for eps in slices for e in eps]
    ready = {
        e["addresses"][0]
        for e in endpoints
        if not e["conditions"].get("terminating", False)
        and (e["conditions"].get("ready", True) or e["addresses"][0] in routable)
    }
    # A gated pod joins the ready peers; without any, the draining fallback stays.
    assert peers == (ready or ungated)


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


# ---- parse_endpoint_slice: only addresses of the slice's type reach NGINX --------------


def raw_slice(
    endpoints: object, address_type: object = "IPv4", ports: object = None
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "web-1",
            "namespace": "ns",
            "labels": {"kubernetes.io/service-name": "web"},
        },
        "addressType": address_type,
        "ports": [{"name": "http", "port": 8080}] if ports is None else ports,
        "endpoints": endpoints,
    }
    return obj


def slice_errors(obj: dict[str, Any]) -> list[str]:
    with pytest.raises(InvalidResource) as info:
        parse_endpoint_slice(obj)
    return info.value.errors


@pytest.mark.parametrize(
    ("address", "address_type"),
    [
        ("10.0.0.1\nH evil.example.com 1", "IPv4"),  # a newline: a second push record
        ("10.0.0.1 10.0.0.2", "IPv4"),
        ("10.0.0.256", "IPv4"),
        ("010.0.0.1", "IPv4"),  # leading zeros: octal to some parsers
        ("fd00::1", "IPv4"),
        ("10.0.0.1", "IPv6"),
        ("fe80::1%eth0", "IPv6"),  # a scope is free text
        ("fe80::1%a\nb", "IPv6"),
        ("db.example.com\n", "FQDN"),
        ("\u0661\u0660.0.0.1", "IPv4"),  # Arabic-Indic digits
        (10, "IPv4"),
    ],
)
def test_addresses_not_of_the_slices_type_reject_the_slice(
    address: object, address_type: str
) -> None:
    good = {"IPv4": "10.0.0.9", "IPv6": "fd00::9", "FQDN": "db.example.com"}[address_type]
    errors = slice_errors(raw_slice([endpoint(good), {"addresses": [address]}], address_type))
    assert errors == [f"endpoints[1].addresses[0]: {address!r} is not an {address_type} address"]


def test_addresses_are_kept_in_canonical_form() -> None:
    sl = parse_endpoint_slice(raw_slice([endpoint("FD00:0::1")], "IPv6"))
    assert sl.endpoints[0].addresses == ("fd00::1",)


def test_fully_qualified_names_may_end_with_a_dot() -> None:
    sl = parse_endpoint_slice(raw_slice([endpoint("db.example.com.")], "FQDN"))
    assert sl.endpoints[0].addresses == ("db.example.com.",)


@pytest.mark.parametrize(
    ("mutate", "error"),
    [
        (lambda o: o.update(ports={"name": "http"}), "ports: must be a list"),
        (lambda o: o.update(ports=7), "ports: must be a list"),
        (lambda o: o.update(endpoints={"addresses": []}), "endpoints: must be a list"),
        (lambda o: o.update(endpoints="10.0.0.1"), "endpoints: must be a list"),
        (lambda o: o.update(addressType="ipv4"), "addressType: must be one of IPv4, IPv6, FQDN"),
        (lambda o: o.update(addressType=["IPv4"]), "addressType: must be one of IPv4, IPv6, FQDN"),
        (lambda o: o["endpoints"].append("10.0.0.2"), "endpoints[1]: must be an object"),
        (
            lambda o: o["endpoints"].append({"addresses": []}),
            "endpoints[1].addresses: must be a list of 1 to 100 addresses",
        ),
        (
            lambda o: o["endpoints"].append({"addresses": "10.0.0.2"}),
            "endpoints[1].addresses: must be a list of 1 to 100 addresses",
        ),
        (
            lambda o: o.update(endpoints=[endpoint("10.0.0.1")] * 1001),
            "endpoints: more than 1000",
        ),
        (
            lambda o: o["metadata"]["labels"].update({"kubernetes.io/service-name": ["web"]}),
            "metadata.labels[kubernetes.io/service-name]: must be a string, not list",
        ),
    ],
)
def test_a_slice_of_the_wrong_shape_is_rejected(
    mutate: Callable[[dict[str, Any]], None], error: str
) -> None:
    obj = raw_slice([endpoint("10.0.0.1")])
    mutate(obj)
    assert slice_errors(obj) == [error]


def test_many_bad_addresses_are_named_a_few_at_a_time() -> None:
    errors = slice_errors(raw_slice([{"addresses": [f"bad{i}" for i in range(100)]}]))
    assert len(errors) == 6
    assert errors[-1] == "and 95 more"


def test_malformed_ports_are_skipped() -> None:
    ports = [{"name": "http", "port": 8080}, {"name": 5, "port": 1}, {"port": True}]
    ports += [{"name": "x", "port": 0}, {"name": "y", "port": 70000}, "z", {"port": "80"}]
    sl = parse_endpoint_slice(raw_slice([endpoint("10.0.0.1")], ports=ports))
    assert sl.ports == {"http": 8080}
    svc = parse_service(
        {
            "kind": "Service",
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"ports": ports},
        }
    )
    assert [(p.name, p.port) for p in svc.ports] == [("http", 8080)]


@pytest.mark.parametrize("spec", [{"ports": {"port": 80}}, {"ports": 80}, ["ports"], "spec"])
def test_a_service_of_the_wrong_shape_is_rejected(spec: object) -> None:
    with pytest.raises(InvalidResource):
        parse_service({"kind": "Service", "metadata": {"name": "web"}, "spec": spec})


def test_an_absent_address_type_means_ipv4() -> None:
    obj = raw_slice([endpoint("10.0.0.1")])
    del obj["addressType"]
    assert parse_endpoint_slice(obj).address_type == "IPv4"
