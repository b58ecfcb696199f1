"""gRPC routes in the records (kinds/virtualserver/records/grpc.py): the R item's ``g`` flag for
a VirtualServer upstream's ``type: grpc`` and an Ingress's
``nginx.org/grpc-services``, NIC's warnings (no TLS or HTTP/2, errorPages a gRPC
location cannot take), and that the module never serves them."""

from __future__ import annotations

from typing import Any

from ferryman.configs.configmap import ConfigMapState
from ferryman.configs.record_text import b64
from ferryman.configs.secret_state import SecretState
from ferryman.kinds.ingress.parse.ingress import parse_ingress
from ferryman.kinds.ingress.records.hosts import ingress_records
from ferryman.kinds.ingress.records.options import ingress_options
from ferryman.kinds.ingress.records.virtual_hosts import virtual_hosts
from ferryman.kinds.virtualserver.parse.virtualserver import parse_virtual_server
from ferryman.kinds.virtualserver.records.delegation import resolve
from ferryman.kinds.virtualserver.records.virtualserver import VSRecords, vs_records
from testkit.vs_delegation import Reads, _vsr
from testkit.vs_fast import locations

TLS = SecretState("cert", None)
NIC_NEEDS = (
    "spec.upstreams[0].type: gRPC cannot be configured for upstream g. "
    "gRPC requires enabled HTTP/2 and TLS termination"
)


def _records(routes: list[dict[str, Any]], *, tls: bool = True, http2: bool = True) -> VSRecords:
    obj = {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": {"name": "v", "namespace": "ns"},
        "spec": {
            "host": "v.example.com",
            "upstreams": [
                {"name": "g", "service": "greeter", "port": 50051, "type": "grpc"},
                {"name": "web", "service": "web", "port": 80},
            ],
            "routes": routes,
        },
    }
    parsed = parse_virtual_server(obj)
    assert parsed.resource is not None, parsed.problems
    return vs_records(parsed.resource, TLS if tls else None, http2=http2)


def _routes(record: str) -> list[list[str]]:
    return [item.split("|") for item in record.split(" ") if item.startswith("R|")]


def test_a_route_to_a_grpc_upstream_is_flagged() -> None:
    out = _records(
        [
            {"path": "/helloworld.Greeter", "action": {"pass": "g"}},
            {"path": "/", "action": {"pass": "web"}},
        ]
    )
    grpc, web = _routes(out.record)
    assert grpc[2] == b64("/helloworld.Greeter") and grpc[8:] == ["g"]
    assert len(web) == 8  # no flags field
    assert out.warnings == ()
    # The module hands gRPC routes to the slow path ("s"), serves the other.
    assert locations(out.fast) == ["s", "f"]


def test_without_tls_or_http2_nic_warns_and_the_route_stays_grpc() -> None:
    route = [{"path": "/", "action": {"pass": "g"}}]
    for out in (_records(route, tls=False), _records(route, http2=False)):
        assert out.warnings == (NIC_NEEDS,)
        assert _routes(out.record)[0][8:] == ["g"]


def test_splits_and_matches_count_and_a_mix_is_http() -> None:
    both = {"path": "/", "splits": [{"weight": 50, "action": {"pass": "g"}}] * 2}
    out = _records([both])
    assert _routes(out.record)[0][8:] == ["g"]
    mixed = {
        "path": "/",
        "matches": [{"conditions": [{"header": "x", "value": "1"}], "action": {"pass": "web"}}],
        "action": {"pass": "g"},
    }
    out = _records([mixed])
    assert len(_routes(out.record)[0]) == 8
    assert out.warnings == (
        "spec.routes[0]: proxies to gRPC and HTTP upstreams, which ferryman serves from "
        "one location per route; proxied as HTTP",
    )
    # A return beside a gRPC pass keeps the route gRPC.
    returns = {
        "path": "/",
        "matches": [
            {"conditions": [{"header": "x", "value": "1"}], "action": {"return": {"body": "no"}}}
        ],
        "action": {"pass": "g"},
    }
    assert _routes(_records([returns]).record)[0][8:] == ["g"]


def test_error_pages_of_codes_the_grpc_location_maps_are_ignored_with_nics_warning() -> None:
    pages = [
        {"codes": [502, 418], "return": {"code": 200, "body": "x"}},
        {"codes": [504], "redirect": {"url": "https://other.test"}},
    ]
    out = _records([{"path": "/", "action": {"pass": "g"}, "errorPages": pages}])
    route = _routes(out.record)[0]
    assert route[6].startswith("418>") and ";" not in route[6]  # 502 and 504 dropped
    assert out.warnings == (
        "spec.routes[0].errorPages: The error page configuration for the upstream g is "
        "ignored for status code(s) [502 504], which cannot be used for GRPC upstreams.",
    )
    # An HTTP route keeps them all.
    out = _records([{"path": "/", "action": {"pass": "web"}, "errorPages": pages}])
    assert _routes(out.record)[0][6].count(">") == 2 and out.warnings == ()


def _ingress(annotations: dict[str, str]) -> Any:
    paths = [
        {
            "path": p,
            "pathType": "Prefix",
            "backend": {"service": {"name": svc, "port": {"number": port}}},
        }
        for p, svc, port in (("/helloworld.Greeter", "grpc-svc", 50051), ("/tea", "tea-svc", 80))
    ]
    return parse_ingress(
        {
            "metadata": {"name": "a", "namespace": "default", "annotations": annotations},
            "spec": {
                "tls": [{"hosts": ["grpc.test"], "secretName": "s"}],
                "rules": [{"host": "grpc.test", "http": {"paths": paths}}],
            },
        }
    )


def test_grpc_services_flags_the_service_paths_with_http2() -> None:
    annotations = {"nginx.org/grpc-services": "grpc-svc", "nginx.org/proxy-buffering": "false"}
    ing = _ingress(annotations)
    vhosts, _ = virtual_hosts(ing, ["grpc.test"], {"s": TLS})
    out = ingress_records(ing, vhosts, None, "ferryman", {"http2": "true"})  # type: ignore[arg-type]
    (written,) = out.written
    assert out.warnings == [] and written.routing is not None
    flags = {b: f[8] for f in _routes(written.routing) for b in [f[2]]}
    assert flags[b64("/helloworld.Greeter/")] == "gu"
    assert flags[b64("/tea/")] == "u"


def test_grpc_services_needs_http2_as_nic_says() -> None:
    annotations = {"nginx.org/grpc-services": "grpc-svc"}
    options, warnings = ingress_options(annotations, {})
    assert options.grpc_services == frozenset() and not options.slow()
    assert warnings == [
        "nginx.org/grpc-services: requires HTTP2 (the ConfigMap's http2), ignoring; "
        "proxied as HTTP/1.1"
    ]
    options, warnings = ingress_options(annotations, {"http2": "true"})
    assert options.grpc_services == frozenset(["grpc-svc"]) and warnings == []


def test_the_configmaps_http2_is_a_route_default() -> None:
    """Every route is rendered again when http2 changes (gRPC reads it)."""
    state = ConfigMapState("ns", "c", lambda tuning: {})
    state.update({"data": {"http2": "True", "worker-processes": "2"}})
    assert state.route_defaults() == {"http2": "true"}


def test_a_virtual_server_routes_grpc_upstream_flags_its_subroutes_only() -> None:
    """A VirtualServerRoute's gRPC upstream: its subroutes are gRPC, the
    VirtualServer's own routes are not, and NIC's warning is the VSR's."""
    vs = parse_virtual_server(
        {
            "apiVersion": "k8s.nginx.org/v1",
            "kind": "VirtualServer",
            "metadata": {"name": "cafe", "namespace": "default"},
            "spec": {
                "host": "cafe.test",
                "upstreams": [{"name": "g", "service": "web", "port": 80}],
                "routes": [{"path": "/", "action": {"pass": "g"}}, {"path": "/a", "route": "a"}],
            },
        }
    ).resource
    assert vs is not None
    vsr = _vsr("a", "/a")
    vsr["spec"]["upstreams"][0]["type"] = "grpc"
    out = resolve(vs, Reads(vsr), "ferryman")
    records = vs_records(vs, None, delegated=out.routes)
    own, sub = _routes(records.record)
    assert len(own) == 8 and sub[8:] == ["g"]
    assert records.warnings == ()
    assert dict(records.routes) == {
        out.routes[0].ref: (
            "spec.upstreams[0].type: gRPC cannot be configured for upstream up. "
            "gRPC requires enabled HTTP/2 and TLS termination",
        )
    }
