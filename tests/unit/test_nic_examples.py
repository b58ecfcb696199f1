"""NIC's own example manifests (v5.5.4 custom-resources) parse as NIC validates them.

Each example ferryman refuses is listed with the reason; everything else must
parse with no problem at all.
"""

from __future__ import annotations

from typing import Any

import pytest

from ferryman.kinds.policy.parse.policy import parse_policy
from ferryman.kinds.virtualserver.parse.virtualserver import VirtualServer, parse_virtual_server
from ferryman.kinds.virtualserver.parse.virtualserverroute import (
    VirtualServerRoute,
    check_for_virtual_server,
    parse_virtual_server_route,
)
from ferryman.resources.nic_fields import Parsed
from testkit.nic_fixtures import nic_examples

# example -> (the field refused, why ferryman does not offer it)
NOT_SUPPORTED = {
    "backup-directive/virtual-server/cafe-virtual-server-backup.yaml/cafe": (
        "spec.upstreams[1].backup",
        "backup servers are not implemented",
    ),
    "cache-policy/cache.yaml/cache-policy": ("spec.cache", "response caching is not implemented"),
    "cache-policy/cafe-virtual-server.yaml/cafe": (
        "spec.server-snippets",
        "snippets are raw NGINX configuration",
    ),
    "jwks/jwks.yaml/jwt-policy": ("spec.jwt.jwksURI", "put the JWKS in a Secret"),
    "jwks/README.md#0/jwt-policy": ("spec.jwt.jwksURI", "put the JWKS in a Secret"),
}
# NIC refuses these on open-source NGINX too, with the same message.
PLUS_ONLY = {
    "health-checks/README.md#0/cafe": (
        "spec.upstreams[0].healthCheck: Forbidden: active health checks are only supported in "
        "NGINX Plus"
    ),
}
# NIC's README for this folder says the API server accepts it and NIC rejects it.
NIC_REJECTS = {
    "vsr-multiple-regex-routes/vsr-api-duplicate-paths.yaml/vsr-api": (
        'spec.subroutes[1].path: Duplicate value: "~ /api/v1"'
    ),
}
PARSERS = {
    "VirtualServer": parse_virtual_server,
    "VirtualServerRoute": parse_virtual_server_route,
    "Policy": parse_policy,
}
EXAMPLES = nic_examples()


def _parse(doc: dict[str, Any]) -> Parsed[Any]:
    doc = {**doc, "metadata": {"namespace": "default", **doc["metadata"]}}
    return PARSERS[doc["kind"]](doc)


def test_the_examples_are_all_found() -> None:
    kinds = [doc["kind"] for _, doc in EXAMPLES]
    # 27 files and 7 README blocks; 13 files; 22 files and 1 README block
    assert (kinds.count("VirtualServer"), kinds.count("VirtualServerRoute")) == (34, 13)
    assert kinds.count("Policy") == 23
    assert set(NOT_SUPPORTED) | set(NIC_REJECTS) | set(PLUS_ONLY) <= {name for name, _ in EXAMPLES}


@pytest.mark.parametrize(("name", "doc"), EXAMPLES, ids=[name for name, _ in EXAMPLES])
def test_each_example_parses_as_nic_validates_it(name: str, doc: dict[str, Any]) -> None:
    parsed = _parse(doc)
    problems = [str(p) for p in parsed.problems]
    if name in NOT_SUPPORTED:
        where, reason = NOT_SUPPORTED[name]
        assert parsed.resource is None
        assert any(p.startswith(f"{where}: Forbidden: not supported by ferryman") for p in problems)
        assert any(reason in p for p in problems), problems
    elif name in NIC_REJECTS:
        assert problems == [NIC_REJECTS[name]]
    elif name in PLUS_ONLY:
        assert problems == [PLUS_ONLY[name]]
    else:
        assert problems == []
        assert parsed.resource is not None


def _example(name: str) -> Any:
    doc = next(doc for n, doc in EXAMPLES if n == name)
    resource = _parse(doc).resource
    assert resource is not None
    return resource


def _check(vs: VirtualServer, vsr: VirtualServerRoute) -> list[str]:
    paths = vs.delegating_paths(vsr.meta.namespace, vsr.meta.name)
    return [str(p) for p in check_for_virtual_server(vsr, vs.host, paths)]


@pytest.mark.parametrize(
    ("folder", "vs", "vsrs"),
    [
        (
            "basic-configuration-vsr",
            "cafe-virtual-server.yaml/cafe",
            ["tea-virtual-server-route.yaml/tea"],
        ),
        (
            "cross-namespace-configuration",
            "cafe-virtual-server.yaml/cafe",
            ["tea-virtual-server-route.yaml/tea", "coffee-virtual-server-route.yaml/coffee"],
        ),
        (
            "vsr-multiple-regex-routes",
            "virtual-server.yaml/api-gateway",
            ["vsr-api.yaml/vsr-api", "vsr-media.yaml/vsr-media"],
        ),
    ],
)
def test_the_examples_routes_fit_their_virtual_servers(
    folder: str, vs: str, vsrs: list[str]
) -> None:
    server = _example(f"{folder}/{vs}")
    for name in vsrs:
        route = _example(f"{folder}/{name}")
        assert server.delegating_paths(route.meta.namespace, route.meta.name)
        assert _check(server, route) == []


@pytest.mark.parametrize(
    ("folder", "routes"),
    [
        ("basic-configuration-vsr", ["coffee-virtual-server-route.yaml/coffee"]),
        (
            "vsr-route-selector-crossnamespace",
            ["coffee-virtual-server-route.yaml/coffee", "tea-virtual-server-route.yaml/tea"],
        ),
    ],
)
def test_routes_selected_by_labels_fit_their_virtual_servers(
    folder: str, routes: list[str]
) -> None:
    server = _example(f"{folder}/cafe-virtual-server.yaml/cafe")
    for name in routes:
        route = _example(f"{folder}/{name}")
        paths = server.selecting_paths(route.meta.labels)
        assert paths == ("/",)
        assert check_for_virtual_server(route, server.host, paths) == []
    assert server.selecting_paths({"app": "other"}) == ()


def test_a_route_with_a_subroute_the_virtual_server_does_not_delegate_is_refused() -> None:
    """NIC's README: the VSR is rejected because it has a subroute the VS does not declare."""
    vs = _example("vsr-multiple-regex-routes/virtual-server.yaml/api-gateway")
    vsr = _example("vsr-multiple-regex-routes/vsr-api-extra-subroute.yaml/vsr-api")
    assert _check(vs, vsr) == [
        "spec.subroutes[2].path: Invalid value: \"~/api/v3\": subroute path '~/api/v3' is not "
        "referenced by any VS route; all VSR subroutes must be referenced"
    ]


def test_a_route_missing_a_delegated_regex_path_is_refused() -> None:
    vs = _example("vsr-multiple-regex-routes/virtual-server.yaml/api-gateway")
    vsr = _example("vsr-multiple-regex-routes/vsr-api-missing-subroute.yaml/vsr-api")
    assert _check(vs, vsr) == [
        "spec.subroutes: Invalid value: \"subroutes\": subroute with path '~/api/v2' is missing; "
        "all VS route paths must be covered by VSR subroutes"
    ]
