"""ferryman.resources.raw: the store's slim, packed objects parse exactly as the
full ones do, errors included, and keep nothing the parsers never read."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ferryman.engine.kind_spec import by_kind
from ferryman.engine.store import Store
from ferryman.kinds import REGISTRY
from ferryman.resources.ingress_class import raw_class_name
from ferryman.resources.meta import InvalidResource, ref_of
from ferryman.resources.raw import LAST_APPLIED, Packed, pack, slim
from ferryman.resources.service import service_name_of
from testkit.parser_cases import VALID, Parser, objects_with_names, raw_objects
from testkit.strategies import mutations, yaml_values

KINDS = by_kind(REGISTRY)

FUZZ = settings(max_examples=300, deadline=None)

MANAGED = [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {"f:x": {}}}}]


def enriched(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` with what the API server and kubectl add and no parser reads."""
    out = copy.deepcopy(dict(obj))
    md = out.get("metadata")
    if isinstance(md, dict):
        md["managedFields"] = MANAGED
        md["ownerReferences"] = [{"kind": "Service", "name": "web", "uid": "u"}]
        md["finalizers"] = ["x.example.com/cleanup"]
        if out.get("kind") not in ("Ingress", "IngressClass"):
            for key in ("labels", "annotations"):
                if isinstance(md.get(key), dict):
                    md[key]["app.example.com/team"] = "blue"
                    md[key][LAST_APPLIED] = '{"kind": "x"}'
    out["status"] = {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}
    if out.get("kind") == "Service" and isinstance(out.get("spec"), dict):
        out["spec"].update(selector={"app": "web"}, clusterIP="10.96.0.1", type="ClusterIP")
        ports = out["spec"].get("ports")
        for p in ports if isinstance(ports, list) else []:
            if isinstance(p, dict):
                p.update(protocol="TCP")
    if out.get("kind") == "EndpointSlice":
        endpoints = out.get("endpoints")
        for e in endpoints if isinstance(endpoints, list) else []:
            if isinstance(e, dict):
                e.update(
                    targetRef={"kind": "Pod", "name": "web-1", "uid": "u", "namespace": "ns"},
                    zone="a",
                    hints={},
                )
    if out.get("kind") == "Secret" and isinstance(out.get("data"), dict):
        out["data"]["ca.crt"] = "Y2E="
    return out


def outcome(parse: Parser, obj: Mapping[str, Any]) -> tuple[str, object]:
    try:
        return "parsed", parse(obj)
    except InvalidResource as e:
        return "rejected", e.errors


def stored(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """What a reader of the store gets back for ``obj``."""
    return pack(obj, kinds=KINDS).unpack()


@pytest.mark.parametrize("kind", sorted(VALID))
@FUZZ
@given(data=st.data())
def test_the_stored_object_parses_as_the_full_one(kind: str, data: st.DataObject) -> None:
    valid, parse = VALID[kind]
    obj = data.draw(mutations(valid) | mutations(enriched(valid)))
    assert outcome(parse, stored(obj)) == outcome(parse, obj)
    assert outcome(parse, stored(enriched(obj))) == outcome(parse, enriched(obj))


@FUZZ
@given(obj=raw_objects | objects_with_names)
def test_random_shapes_parse_and_are_read_the_same(obj: dict[Any, Any]) -> None:
    for parse in (p for _, p in VALID.values()):
        assert outcome(parse, stored(obj)) == outcome(parse, obj)
    s = stored(obj)
    assert (ref_of(s), service_name_of(s), raw_class_name(s)) == (
        ref_of(obj),
        service_name_of(obj),
        raw_class_name(obj),
    )


def test_what_no_parser_reads_is_not_kept() -> None:
    for kind, (valid, _) in VALID.items():
        kept = slim(enriched(valid), kinds=KINDS)
        # An Ingress's status is kept for the reporter (KindSpec.reported), read by no parser.
        assert ("status" in kept) == (kind == "Ingress")
        assert not {"managedFields", "ownerReferences", "finalizers"} & set(kept["metadata"])
        for key in ("labels", "annotations"):
            assert LAST_APPLIED not in kept["metadata"].get(key, {})
            if kind not in ("Ingress", "IngressClass"):
                assert "app.example.com/team" not in kept["metadata"].get(key, {})
    # Of targetRef, only a Pod's kind and name (the latency histogram's pod_name).
    assert slim(enriched(VALID["EndpointSlice"][0]), kinds=KINDS)["endpoints"][0] == {
        "addresses": ["10.0.0.1"],
        "conditions": {"ready": True},
        "nodeName": "n1",
        "targetRef": {"kind": "Pod", "name": "web-1"},
    }


def test_a_tls_secret_keeps_its_pair_and_ca_only() -> None:
    """ca.crt is read (ingress-nginx's proxy-ssl-secret: the backend's CAs); the
    store used to drop it, so proxy-ssl-verify could not be served."""
    data = {"tls.crt": "Yw==", "tls.key": "aw==", "ca.crt": "Y2E=", "extra": "eA=="}
    secret = {"kind": "Secret", "metadata": {"name": "s"}, "type": "kubernetes.io/tls"}
    kept = slim({**secret, "data": data}, kinds=KINDS)
    assert kept["data"] == {"tls.crt": "Yw==", "tls.key": "aw==", "ca.crt": "Y2E="}


def test_a_service_ports_app_protocol_is_kept() -> None:
    """Gateway API's backends honour it (kinds/gateway/records/backend_protocols.py)."""
    svc = enriched(VALID["Service"][0])
    svc["spec"]["ports"][0]["appProtocol"] = "kubernetes.io/h2c"
    (port, *_) = stored(svc)["spec"]["ports"]
    assert port["appProtocol"] == "kubernetes.io/h2c" and "protocol" not in port


@pytest.mark.parametrize(
    "conditions",
    [
        {"ready": False, "serving": True, "terminating": True},
        {"ready": True, "serving": True, "terminating": True},
        {"ready": False, "serving": False, "terminating": True},
        {"serving": False},
    ],
)
def test_every_endpoint_condition_is_kept(conditions: dict[str, bool]) -> None:
    # A draining pod (serving, terminating) is a peer only through these fields.
    endpoint_slice, parse = VALID["EndpointSlice"]
    obj = copy.deepcopy(dict(endpoint_slice))
    obj["endpoints"][0]["conditions"] = conditions
    assert stored(obj)["endpoints"][0]["conditions"] == conditions
    assert parse(stored(obj)) == parse(obj)


def test_an_ingress_loses_only_the_last_applied_annotation() -> None:
    ingress, parse = VALID["Ingress"]
    applied = copy.deepcopy(dict(ingress))
    applied["metadata"]["annotations"][LAST_APPLIED] = '{"kind": "Ingress"}'
    assert parse(stored(applied)) == parse(ingress)


@FUZZ
@given(value=yaml_values)
def test_packing_keeps_any_value_a_manifest_can_hold(value: object) -> None:
    obj = {"kind": "Other", "metadata": {"name": "x"}, "field": value}
    # By repr: a YAML .nan is a value a manifest can hold, and nan != nan.
    assert repr(Packed(obj).unpack()) == repr(obj)
    if "nan" not in repr(value):
        assert Packed(obj) == obj


def test_readers_of_the_store_get_copies_of_their_own() -> None:
    s = Store(REGISTRY)
    s.upsert(enriched(VALID["Service"][0]))
    got = s.get("Service", "shop", "web")
    assert got is not None
    got["spec"]["ports"].clear()
    again = s.get("Service", "shop", "web")
    assert again is not None and again["spec"]["ports"] == [
        {"name": "http", "port": 80},
        {"port": 9090},
    ]


def test_a_namespace_keeps_every_label() -> None:
    """Gateway API's allowedRoutes selects namespaces by any label; readiness
    gates read one of them."""
    labels = {"ferryman.io/pod-readiness-gate-inject": "enabled", "team": "a", "env": "prod"}
    ns = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "shop", "labels": labels, "managedFields": [{}]},
        "status": {"phase": "Active"},
    }
    assert slim(ns) == {"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": "shop", "labels": labels}}  # fmt: skip
