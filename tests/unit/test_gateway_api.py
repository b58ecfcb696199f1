"""Gateway API parsers: the CRDs' defaults and the rules the API server would
enforce, which nothing else enforces in manifests mode."""

from __future__ import annotations

from typing import Any

from ferryman.kinds.gateway.parse.gateway_api import Match, parse_gateway, parse_http_route
from ferryman.resources.reference_grant import parse_reference_grant


def _route(rules: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "r", "namespace": "ns", "generation": 3},
        "spec": {"parentRefs": [{"name": "gw"}], "rules": rules, **spec},
    }


def _gateway(*listeners: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "ns"},
        "spec": {"gatewayClassName": "ferryman", "listeners": list(listeners)},
    }


def test_the_crds_defaults() -> None:
    parsed = parse_http_route(_route([{"backendRefs": [{"name": "svc", "port": 8080}]}]))
    route = parsed.resource
    assert route is not None and route.meta.generation == 3
    parent = route.parents[0]
    assert (parent.group, parent.kind, parent.namespace) == (
        "gateway.networking.k8s.io",
        "Gateway",
        None,
    )
    rule = route.rules[0]
    assert rule.matches == (Match("PathPrefix", "/"),)
    backend = rule.backends[0]
    assert (backend.ref.group, backend.ref.kind, backend.weight) == ("", "Service", 1)
    assert parse_http_route(_route([])).resource is not None  # no rules: one default rule
    gw = parse_gateway(_gateway({"name": "http", "port": 80, "protocol": "HTTP"})).resource
    assert gw is not None and gw.listeners[0].namespaces_from == "Same"


def _problems(doc: dict[str, Any]) -> str:
    parsed = parse_http_route(doc) if doc["kind"] == "HTTPRoute" else parse_gateway(doc)
    assert parsed.resource is None
    return parsed.message()


def test_what_the_api_server_would_refuse_is_refused_with_the_field() -> None:
    bad_path = [{"matches": [{"path": {"type": "PathPrefix", "value": "/a//b"}}]}]
    assert "spec.rules[0].matches[0].path.value" in _problems(_route(bad_path))
    header = [{"matches": [{"headers": [{"name": "bad name", "value": "x"}]}]}]
    assert "headers[0].name" in _problems(_route(header))
    code = [{"filters": [{"type": "RequestRedirect", "requestRedirect": {"statusCode": 304}}]}]
    assert "statusCode" in _problems(_route(code))
    both = [
        {
            "filters": [
                {"type": "RequestRedirect", "requestRedirect": {"scheme": "https"}},
                {"type": "URLRewrite", "urlRewrite": {"hostname": "a.test"}},
            ]
        }
    ]
    assert "but not both" in _problems(_route(both))
    no_port = [{"backendRefs": [{"name": "svc"}]}]
    assert "backendRefs[0].port" in _problems(_route(no_port))
    assert "Unknown field" in _problems(_route([{"matchez": []}]))
    https = {"name": "https", "port": 443, "protocol": "HTTPS"}
    assert "spec.listeners[0].tls" in _problems(_gateway(https))
    twice = {"name": "a", "port": 80, "protocol": "HTTP"}
    assert "Duplicate value" in _problems(_gateway(twice, twice))


def test_a_reference_grant_allows_exactly_what_it_names() -> None:
    grant = parse_reference_grant(
        {
            "apiVersion": "gateway.networking.k8s.io/v1beta1",
            "kind": "ReferenceGrant",
            "metadata": {"name": "g", "namespace": "backends"},
            "spec": {
                "from": [
                    {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "web"}
                ],
                "to": [{"group": "", "kind": "Service", "name": "app"}],
            },
        }
    ).resource
    assert grant is not None
    route = ("gateway.networking.k8s.io", "HTTPRoute")
    assert grant.allows(*route, "web", "", "Service", "app")
    assert not grant.allows(*route, "web", "", "Service", "other")
    assert not grant.allows(*route, "elsewhere", "", "Service", "app")
    assert not grant.allows("gateway.networking.k8s.io", "Gateway", "web", "", "Service", "app")


def _mirror(**fields: Any) -> dict[str, Any]:
    mirror = {"backendRef": {"name": "copy", "port": 80}, **fields}
    return _route([{"filters": [{"type": "RequestMirror", "requestMirror": mirror}]}])


def test_request_mirror_percentages() -> None:
    def percent(**fields: Any) -> float:
        route = parse_http_route(_mirror(**fields)).resource
        assert route is not None
        return route.rules[0].filters[0].mirror_percent

    assert percent() == 100.0
    assert percent(percent=25) == 25.0
    assert percent(fraction={"numerator": 1}) == 1.0
    assert percent(fraction={"numerator": 1, "denominator": 3}) == 100 / 3
    for bad in (
        {"percent": 101},
        {"fraction": {"numerator": 4, "denominator": 3}},
        {"percent": 5, "fraction": {"numerator": 1}},
    ):
        assert parse_http_route(_mirror(**bad)).resource is None, bad


def test_rule_timeouts() -> None:
    def timeouts(**t: str) -> tuple[float | None, float | None]:
        rule = {"backendRefs": [{"name": "svc", "port": 80}], "timeouts": t}
        route = parse_http_route(_route([rule])).resource
        assert route is not None
        return route.rules[0].request_timeout, route.rules[0].backend_timeout

    assert timeouts(request="500ms") == (0.5, None)
    assert timeouts(request="1h2m3s", backendRequest="0s") == (3723.0, 0.0)
    assert timeouts(request="2s", backendRequest="1s500ms") == (2.0, 1.5)
    for bad in ({"request": "1.5s"}, {"request": "1d"}, {"request": "1s", "backendRequest": "2s"}):
        assert parse_http_route(_route([{"timeouts": bad}])).resource is None, bad
