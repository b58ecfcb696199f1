"""ferryman reads every Gateway API object of the conformance suite's own
manifests (v1.6.3) as the API server accepts them: each GatewayClass, Gateway,
ListenerSet, HTTPRoute and ReferenceGrant parses without a problem, with the CRDs' defaults."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import yaml

from ferryman.kinds.gateway.parse.gateway_api import (
    parse_gateway,
    parse_http_route,
)
from ferryman.kinds.gateway.parse.gateway_class import parse_gateway_class
from ferryman.kinds.gateway.parse.listener_set import parse_listener_set
from ferryman.resources.nic_fields import Parsed
from ferryman.resources.reference_grant import parse_reference_grant
from testkit.gateway_environment import Conformance

PARSERS: dict[str, Callable[[Mapping[str, Any]], Parsed[Any]]] = {
    "GatewayClass": parse_gateway_class,
    "Gateway": parse_gateway,
    "HTTPRoute": parse_http_route,
    "ReferenceGrant": parse_reference_grant,
    "ListenerSet": parse_listener_set,
}


def test_every_object_of_the_suites_manifests_parses(conformance: Conformance) -> None:
    files = sorted((conformance.crds.parent / "tests").glob("*.yaml"))
    files.append(conformance.crds.parent / "base-manifests.yaml")
    counts = dict.fromkeys(PARSERS, 0)
    problems = []
    for path in files:
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc or not str(doc.get("apiVersion", "")).startswith("gateway.networking"):
                continue
            if (parse := PARSERS.get(doc["kind"])) is None:
                continue
            counts[doc["kind"]] += 1
            # The suite names its class and controller when it applies them.
            if doc["kind"] == "Gateway":
                doc["spec"]["gatewayClassName"] = "ferryman"
            if doc["kind"] == "GatewayClass":
                doc["spec"]["controllerName"] = "ferryman.io/gateway-controller"
            parsed = parse(doc)
            if parsed.resource is None:
                problems.append(f"{path.name} {doc['metadata']['name']}: {parsed.message()}")
    assert not problems
    assert counts["HTTPRoute"] > 100 and counts["Gateway"] > 20 and counts["ReferenceGrant"] > 3
    assert counts["ListenerSet"] > 15
