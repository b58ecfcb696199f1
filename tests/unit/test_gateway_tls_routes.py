"""TLSRoute: its parser's rules (v1's CRD), its attachment to TLS listeners
(passing TLS through or ending it) with the conditions the specification asks
for, the stream servers and S and T records it becomes, and one socket per
kind across Gateways."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferryman.engine.settings import Settings
from ferryman.engine.store import Store
from ferryman.kinds.gateway.parse.gateway_api import Gateway, parse_gateway, parse_http_route
from ferryman.kinds.gateway.parse.tls_route import TLSRoute, parse_tls_route
from ferryman.kinds.gateway.records.attach import Attachment, Route, attach
from ferryman.kinds.gateway.records.passthrough import (
    PassthroughServed,
    certificate_records,
    passthrough_records,
    render_passthrough,
    stream_name,
)
from ferryman.kinds.gateway.translate.ports import PortRules
from ferryman.resources.secret import TLSPair

TLS = {"name": "tls", "port": 443, "protocol": "TLS", "tls": {"mode": "Passthrough"}}
SERVICES = {("gw", "app"), ("gw", "shop"), ("other", "app")}


def gateway(*listeners: dict[str, Any], name: str = "g", age: str = "") -> Gateway:
    meta: dict[str, Any] = {"name": name, "namespace": "gw"}
    if age:
        meta["creationTimestamp"] = age
    parsed = parse_gateway(
        {"metadata": meta, "spec": {"gatewayClassName": "ferryman", "listeners": list(listeners)}}
    )
    assert parsed.resource is not None, parsed.message()
    return parsed.resource


def tls_doc(
    name: str, hostnames: list[str], *backends: dict[str, Any], **meta: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "gw", **meta},
        "spec": {
            "parentRefs": [{"name": "g"}],
            "hostnames": hostnames,
            "rules": [{"backendRefs": list(backends) or [{"name": "app", "port": 8443}]}],
        },
    }


def tls_route(
    name: str, hostnames: list[str], *backends: dict[str, Any], age: str = ""
) -> TLSRoute:
    meta = {"creationTimestamp": age} if age else {}
    parsed = parse_tls_route(tls_doc(name, hostnames, *backends, **meta))
    assert parsed.resource is not None, parsed.message()
    return parsed.resource


def run(gws: list[Gateway], routes: list[Route], passthrough: bool = True) -> Attachment:
    return attach(
        gws, routes, (), lambda ns, n: "not found", lambda ns: {},
        lambda ns, n: (ns, n) in SERVICES, tls_passthrough=passthrough,
    )  # fmt: skip


def conditions(att: Attachment, name: str) -> dict[str, str]:
    (parent,) = att.routes[("gw", name)]
    return {c.type: c.reason for c in parent.conditions}


def listener(att: Attachment, name: str = "tls") -> tuple[Any, dict[str, str]]:
    (status,) = [s for s in att.gateways[("gw", "g")].listeners if s.name == name]
    return status, {c.type: c.reason for c in status.conditions}


# ---- parse ----------------------------------------------------------------------------


def test_a_tls_route_reads_its_parents_hostnames_and_backend() -> None:
    route = tls_route("r", ["app.example.com", "*.shop.example.com"])
    assert route.kind == "TLSRoute"
    assert route.hostnames == ("app.example.com", "*.shop.example.com")
    (rule,) = route.rules
    (backend,) = rule.backends
    assert (backend.ref.kind, backend.ref.name, backend.port, backend.weight) == (
        "Service", "app", 8443, 1,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ({"hostnames": []}, "spec.hostnames"),
        ({"hostnames": ["10.0.0.1"]}, "not an IP address"),
        ({"hostnames": ["UPPER.example.com"]}, "lower case hostname"),
        ({"rules": []}, "exactly 1"),
        ({"rules": [{"backendRefs": []}]}, "1 to 16"),
        ({"rules": [{"backendRefs": [{"name": "app"}]}]}, "port"),
        ({"rules": [{"backendRefs": [{"name": "app", "port": 1, "weight": -1}]}]}, "weight"),
        ({"rules": [{"backendRefs": [{"name": "app", "port": 1}]}], "extra": 1}, "extra"),
    ],
)
def test_a_tls_route_breaking_the_crds_rules_is_refused(spec: dict[str, Any], problem: str) -> None:
    doc = tls_doc("r", ["app.example.com"])
    doc["spec"].update(spec)
    parsed = parse_tls_route(doc)
    assert parsed.resource is None
    assert problem in parsed.message()


@given(st.dictionaries(st.text(max_size=12), st.none() | st.integers() | st.text(max_size=20)))
def test_any_spec_parses_or_is_refused_never_raises(spec: dict[str, Any]) -> None:
    parse_tls_route({"metadata": {"name": "r", "namespace": "gw"}, "spec": spec})


# ---- attachment -----------------------------------------------------------------------


def test_a_tls_route_attaches_to_a_passthrough_listener() -> None:
    att = run([gateway(dict(TLS, hostname="*.example.com"))], [tls_route("r", ["app.example.com"])])
    assert conditions(att, "r") == {"Accepted": "Accepted", "ResolvedRefs": "ResolvedRefs"}
    status, reasons = listener(att)
    assert status.supported_kinds == (("gateway.networking.k8s.io", "TLSRoute"),)
    assert status.attached_routes == 1
    assert reasons["Programmed"] == "Programmed"
    entry = att.passthrough[("gw", "g", "tls")]["app.example.com"]
    assert (entry.route, entry.backends) == ("gw/r", (("gw", "app", 8443, 1),))


def test_hostnames_intersect_and_the_oldest_route_keeps_a_name() -> None:
    att = run(
        [gateway(dict(TLS, hostname="*.example.com"))],
        [
            tls_route("miss", ["app.example.org"]),
            tls_route("new", ["app.example.com", "x.example.com"], age="2026-02-01T00:00:00Z"),
            tls_route("old", ["app.example.com"], age="2026-01-01T00:00:00Z"),
        ],
    )
    assert conditions(att, "miss")["Accepted"] == "NoMatchingListenerHostname"
    table = att.passthrough[("gw", "g", "tls")]
    assert table["app.example.com"].route == "gw/old"
    assert table["x.example.com"].route == "gw/new"


def test_route_kinds_follow_the_listeners_protocol() -> None:
    http = {"name": "http", "port": 80, "protocol": "HTTP"}
    doc = {"metadata": {"name": "h", "namespace": "gw"},
           "spec": {"parentRefs": [{"name": "g", "sectionName": "tls"}]}}  # fmt: skip
    parsed = parse_http_route(doc)
    assert parsed.resource is not None
    tls_on_http = tls_route("t", ["app.example.com"])
    att = run([gateway(TLS, http)], [parsed.resource, tls_on_http])
    assert conditions(att, "h")["Accepted"] == "NotAllowedByListeners"
    # Its parentRef names no section: the HTTP listener does not take it, the TLS one does.
    assert conditions(att, "t")["Accepted"] == "Accepted"
    named = dict(TLS, allowedRoutes={"kinds": [{"kind": "HTTPRoute"}]})
    _, bad = listener(run([gateway(named)], []))
    assert bad["ResolvedRefs"] == "InvalidRouteKinds"


TERMINATE = dict(TLS, tls={"mode": "Terminate", "certificateRefs": [{"name": "c"}]})


def test_a_terminating_listener_needs_its_certificate() -> None:
    _, reasons = listener(run([gateway(TERMINATE)], []))
    assert reasons["ResolvedRefs"] == "InvalidCertificateRef"
    assert (reasons["Accepted"], reasons["Programmed"]) == ("Accepted", "Invalid")
    att = attach(
        [gateway(TERMINATE)], [tls_route("t", ["app.example.com"])], (),
        lambda ns, n: None, lambda ns: {}, lambda ns, n: (ns, n) in SERVICES,
        tls_passthrough=True,
    )  # fmt: skip
    status, reasons = listener(att)
    assert reasons == {
        "Accepted": "Accepted", "ResolvedRefs": "ResolvedRefs",
        "Conflicted": "NoConflicts", "Programmed": "Programmed",
    }  # fmt: skip
    assert status.supported_kinds == (("gateway.networking.k8s.io", "TLSRoute"),)
    assert conditions(att, "t")["Accepted"] == "Accepted"


def test_one_port_either_ends_tls_or_passes_it_through() -> None:
    """TLSRouteModeMixed is not claimed: both listeners are refused, as the
    conformance suite's TLSRouteListenerMixedTerminationNotSupported asks."""
    passing = dict(TLS, name="pass", hostname="p.example.com")
    ending = dict(TERMINATE, name="end", hostname="e.example.com")
    att = attach(
        [gateway(passing, ending)], [], (), lambda ns, n: None, lambda ns: {},
        lambda ns, n: True, tls_passthrough=True,
    )  # fmt: skip
    for name in ("pass", "end"):
        status, reasons = listener(att, name)
        assert (reasons["Accepted"], reasons["Conflicted"]) == ("ProtocolConflict",) * 2
        assert reasons["Programmed"] == "Invalid"
        assert status.supported_kinds == ()


def test_what_is_not_served_says_so() -> None:
    # No stream module in NGINX (Angie): TLS listeners are not served at all.
    _, reasons = listener(run([gateway(TLS)], [], passthrough=False))
    assert reasons["Accepted"] == "UnsupportedProtocol"
    weighted = tls_route(
        "w", ["app.example.com"], {"name": "app", "port": 1}, {"name": "shop", "port": 1}
    )
    zero = tls_route(
        "z", ["z.example.com"], {"name": "app", "port": 1}, {"name": "shop", "port": 1, "weight": 0}
    )
    att = run([gateway(TLS)], [weighted, zero])
    assert conditions(att, "w")["Accepted"] == "UnsupportedValue"
    assert conditions(att, "z")["Accepted"] == "Accepted"


def test_backend_problems_are_reported_and_close_the_name() -> None:
    missing = tls_route("m", ["m.example.com"], {"name": "gone", "port": 1})
    other = tls_route("o", ["o.example.com"], {"name": "app", "namespace": "other", "port": 1})
    att = run([gateway(TLS)], [missing, other])
    assert conditions(att, "m")["ResolvedRefs"] == "BackendNotFound"
    assert conditions(att, "o")["ResolvedRefs"] == "RefNotPermitted"
    served = [
        PassthroughServed("*", gateway(TLS).listeners[0], att.passthrough[("gw", "g", "tls")])
    ]
    records, uses = passthrough_records(served)
    assert records == {} and uses == {}


# ---- records and sockets --------------------------------------------------------------


def test_records_name_the_socket_and_the_sni_name() -> None:
    att = run([gateway(TLS)], [tls_route("r", ["app.example.com", "*.shop.example.com"])])
    served = [
        PassthroughServed(
            "10.0.0.5", gateway(TLS).listeners[0], att.passthrough[("gw", "g", "tls")]
        )
    ]
    records, uses = passthrough_records(served)
    assert records == {
        "gateway.10.0.0.5.443/app.example.com": "gw/app:8443 random2lc 1 10000 0 0 1 0",
        "gateway.10.0.0.5.443/*.shop.example.com": "gw/app:8443 random2lc 1 10000 0 0 1 0",
    }
    assert list(uses) == ["gw/r"]
    assert stream_name("*", 443) == "gateway.443"
    conf = render_passthrough([("*", 443, False), ("10.0.0.5", 8443, False), ("*", 443, False)])
    assert conf.count("server {") == 2
    assert "listen 443;\n" in conf and "listen 10.0.0.5:8443;\n" in conf
    assert "ferryman_stream_preread;" in conf and "ssl_preread on;" in conf
    assert "ssl_certificate" not in conf


def test_a_terminating_socket_takes_its_certificates_from_t_records() -> None:
    pair = TLSPair(b"CHAIN", b"KEY")
    named = gateway(dict(TERMINATE, hostname="*.example.com")).listeners[0]
    anyhost = gateway(dict(TERMINATE, port=8443)).listeners[0]
    served = [
        PassthroughServed("*", named, {}, pair),
        PassthroughServed("10.0.0.5", anyhost, {}, pair),
        PassthroughServed("*", gateway(TLS).listeners[0], {}, None),
    ]
    assert certificate_records(served) == {
        "gateway.443/*.example.com": "Q0hBSU4= S0VZ",
        "gateway.10.0.0.5.8443": "Q0hBSU4= S0VZ",
    }
    conf = render_passthrough([("10.0.0.5", 8443, True)])
    assert "listen 10.0.0.5:8443 ssl;\n" in conf and "ssl_preread" not in conf
    assert "ssl_certificate data:$ferryman_stream_certificate;" in conf
    # Every covering wildcard first, then the name as the handshake ended it.
    assert conf.index("ferryman_stream_preread;") < conf.index("ferryman_stream_sni;")


def test_an_older_gateways_socket_keeps_its_nginx_block(tmp_path: Path) -> None:
    """A TLS listener and an HTTP one on one port of one address cannot both
    be: the younger Gateway's listener is PortUnavailable."""
    http = {"name": "http", "port": 9443, "protocol": "HTTP"}
    old = gateway(http, name="old", age="2026-01-01T00:00:00Z")
    young = gateway(dict(TLS, port=9443), name="young", age="2026-02-01T00:00:00Z")
    rules = PortRules(Settings(state_dir=tmp_path), Store(), None)
    rules.update([old, young], {("gw", "old"): "*", ("gw", "young"): "10.0.0.5"}, {})
    why = rules.unavailable(young, young.listeners[0])
    assert why == "port 9443 is Gateway gw/old's HTTP socket"
    assert rules.unavailable(old, old.listeners[0]) is None
    # Different addresses: both.
    rules.update([old, young], {("gw", "old"): "10.0.0.4", ("gw", "young"): "10.0.0.5"}, {})
    assert rules.unavailable(young, young.listeners[0]) is None
    # One stream socket cannot both pass TLS through and end it.
    ending = gateway(dict(TERMINATE, port=9443), name="ending", age="2026-03-01T00:00:00Z")
    rules.update([young, ending], {("gw", "young"): "*", ("gw", "ending"): "*"}, {})
    why = rules.unavailable(ending, ending.listeners[0])
    assert why == "port 9443 is Gateway gw/young's TLS passthrough socket"
