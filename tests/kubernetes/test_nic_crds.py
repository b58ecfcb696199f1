"""deploy/crds' VirtualServer, VirtualServerRoute and Policy CRDs on a real kube-apiserver:
every NIC example manifest is accepted and kept whole (nothing pruned), ferryman's parsers
read back what the API server stored as they read the file, and objects that break the
schema are refused by the API server itself."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from lightkube import ApiError, Client, codecs
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace
from lightkube.types import PatchType

from ferryman.kinds.policy.parse.policy import parse_policy
from ferryman.kinds.virtualserver.parse.virtualserver import parse_virtual_server
from ferryman.kinds.virtualserver.parse.virtualserverroute import parse_virtual_server_route
from testkit.apiserver import APIServer, install_crds, wait_until
from testkit.nic_fixtures import (
    POLICIES,
    ROOT,
    VIRTUAL_SERVER,
    VIRTUAL_SERVER_ROUTE,
    nic_examples,
)

CRDS = sorted((ROOT / "deploy" / "crds").glob("k8s.nginx.org_*.yaml"))
RESOURCES = {
    "VirtualServer": create_namespaced_resource(
        "k8s.nginx.org", "v1", "VirtualServer", "virtualservers"
    ),
    "VirtualServerRoute": create_namespaced_resource(
        "k8s.nginx.org", "v1", "VirtualServerRoute", "virtualserverroutes"
    ),
    "Policy": create_namespaced_resource("k8s.nginx.org", "v1", "Policy", "policies"),
}
PARSERS = {
    "VirtualServer": parse_virtual_server,
    "VirtualServerRoute": parse_virtual_server_route,
    "Policy": parse_policy,
}
_names = itertools.count()


@pytest.fixture(scope="module")
def kube(apiserver: APIServer) -> Iterator[Client]:
    client = apiserver.client()
    assert len(CRDS) == 5  # and TransportServer, GlobalConfiguration
    install_crds(client, *CRDS)

    def served() -> bool:
        return all(
            list(client.list(r, namespace="default")) is not None for r in RESOURCES.values()
        )

    wait_until(served, 60, "the k8s.nginx.org kinds")
    yield client


@pytest.fixture(scope="module")
def ns(kube: Client) -> str:
    name = f"nic{next(_names)}"
    kube.create(Namespace(metadata=ObjectMeta(name=name)))
    return name


def _create(kube: Client, ns: str, doc: dict[str, Any]) -> dict[str, Any]:
    """The object as the API server stored it, under a fresh name in ``ns``."""
    obj = copy.deepcopy(doc)
    obj["metadata"] = {**obj["metadata"], "namespace": ns}
    obj["metadata"]["name"] = f"e{next(_names)}-{doc['metadata']['name']}"
    created = kube.create(codecs.from_dict(obj))
    return dict(created.to_dict())


EXAMPLES = nic_examples()


@pytest.mark.parametrize(("name", "doc"), EXAMPLES, ids=[name for name, _ in EXAMPLES])
def test_the_api_server_keeps_every_nic_example_whole(
    kube: Client, ns: str, name: str, doc: dict[str, Any]
) -> None:
    stored = _create(kube, ns, doc)
    assert stored["spec"] == doc["spec"], "the CRD pruned or changed fields of NIC's manifest"
    local = PARSERS[doc["kind"]]({**doc, "metadata": {**doc["metadata"], "namespace": ns}})
    served = PARSERS[doc["kind"]](stored)
    assert [str(p) for p in served.problems] == [str(p) for p in local.problems]


@pytest.mark.parametrize("doc", [VIRTUAL_SERVER, VIRTUAL_SERVER_ROUTE, *POLICIES])
def test_the_api_server_keeps_every_field_ferryman_reads(
    kube: Client, ns: str, doc: dict[str, Any]
) -> None:
    stored = _create(kube, ns, doc)
    assert stored["spec"] == doc["spec"]
    parsed = PARSERS[doc["kind"]](stored)
    assert parsed.problems == () and parsed.resource is not None


def _refused(kube: Client, ns: str, doc: dict[str, Any]) -> str:
    with pytest.raises(ApiError) as raised:
        _create(kube, ns, doc)
    assert raised.value.status.code == 422
    return str(raised.value.status.message)


def test_objects_that_break_the_schema_are_refused(kube: Client, ns: str) -> None:
    bad_port = copy.deepcopy(VIRTUAL_SERVER)
    bad_port["spec"]["upstreams"][0]["port"] = "eighty"
    assert 'spec.upstreams[0].port: Invalid value: "string"' in _refused(kube, ns, bad_port)

    out_of_range = copy.deepcopy(VIRTUAL_SERVER_ROUTE)
    out_of_range["spec"]["upstreams"][0]["port"] = 70000
    assert "spec.upstreams[0].port: Invalid value: 70000" in _refused(kube, ns, out_of_range)

    cors = copy.deepcopy(next(p for p in POLICIES if p["metadata"]["name"] == "cors"))
    cors["spec"]["cors"]["allowOrigin"] = ["*"]
    assert "cannot use wildcard '*' for allowOrigin when allowCredentials is true" in _refused(
        kube, ns, cors
    )

    two = copy.deepcopy(next(p for p in POLICIES if p["metadata"]["name"] == "rate"))
    two["spec"]["rateLimit"]["condition"]["variables"] *= 2
    assert "variables: Too many: 2: must have at most 1 ite" in _refused(kube, ns, two)

    spaced = copy.deepcopy(two)
    spaced["spec"]["rateLimit"]["condition"]["variables"] = [{"name": "$a b", "match": "x"}]
    assert "spec.rateLimit.condition.variables[0].name" in _refused(kube, ns, spaced)


def test_status_is_a_subresource(kube: Client, ns: str) -> None:
    """Only the status subresource writes status (so a user's apply never resets it)."""
    stored = _create(kube, ns, VIRTUAL_SERVER)
    name = stored["metadata"]["name"]
    vs = RESOURCES["VirtualServer"]
    status = {"state": "Valid", "reason": "AddedOrUpdated", "message": "ok"}
    kube.patch(vs, name, {"status": {"state": "Ignored"}}, namespace=ns, patch_type=PatchType.MERGE)
    assert kube.get(vs, name, namespace=ns).get("status") in (None, {})
    kube.patch(vs.Status, name, {"status": status}, namespace=ns, patch_type=PatchType.MERGE)
    assert kube.get(vs, name, namespace=ns)["status"] == status
