"""ferryman.engine.store.Store: the cache and its EndpointSlice index."""

from __future__ import annotations

from typing import Any

import pytest

from ferryman.engine.store import Store
from ferryman.resources.meta import ObjectRef


def es(name: str, service: str | None, namespace: str = "ns", rv: str = "1") -> dict[str, Any]:
    labels = {"kubernetes.io/service-name": service} if service is not None else {}
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "resourceVersion": rv},
        "addressType": "IPv4",
        "endpoints": [],
    }


def names(objs: list[Any]) -> list[str]:
    return [o["metadata"]["name"] for o in objs]


def test_upsert_get_and_the_previous_version() -> None:
    s = Store()
    svc = {"kind": "Service", "metadata": {"name": "web", "namespace": "ns"}}
    assert s.upsert(svc) is None
    newer = {**svc, "spec": {"ports": []}}
    assert s.upsert(newer) == svc
    assert s.get("Service", "ns", "web") == newer
    assert s.get("Service", "other", "web") is None
    assert s.get("Ingress", "ns", "web") is None
    assert s.count("Service") == 1
    assert s.refs("Service") == [ObjectRef("Service", "ns", "web")]
    assert s.objects("Service") == [newer]


def test_cluster_scoped_objects() -> None:
    s = Store()
    s.upsert({"kind": "IngressClass", "metadata": {"name": "ferryman"}})
    assert s.get("IngressClass", "", "ferryman") is not None
    assert s.refs("IngressClass") == [ObjectRef("IngressClass", "", "ferryman")]


def test_objects_without_identity_are_refused() -> None:
    s = Store()
    with pytest.raises(ValueError):
        s.upsert({"kind": "Service", "metadata": {}})
    with pytest.raises(ValueError):
        s.upsert({"metadata": {"name": "x"}})


def test_slices_are_indexed_by_their_service_label() -> None:
    s = Store()
    s.upsert(es("web-b", "web"))
    s.upsert(es("web-a", "web"))
    s.upsert(es("api-a", "api"))
    s.upsert(es("web-x", "web", namespace="other"))
    assert names(s.slices_for("ns", "web")) == ["web-a", "web-b"]
    assert names(s.slices_for("ns", "api")) == ["api-a"]
    assert names(s.slices_for("other", "web")) == ["web-x"]
    assert s.slices_for("ns", "nothing") == []


def test_slices_for_returns_the_current_version() -> None:
    s = Store()
    s.upsert(es("web-a", "web", rv="1"))
    s.upsert(es("web-a", "web", rv="2"))
    (current,) = s.slices_for("ns", "web")
    assert current["metadata"]["resourceVersion"] == "2"


def test_a_slice_moving_to_another_service_is_reindexed() -> None:
    s = Store()
    s.upsert(es("shared", "web"))
    s.upsert(es("shared", "api"))
    assert s.slices_for("ns", "web") == []
    assert names(s.slices_for("ns", "api")) == ["shared"]
    s.upsert(es("shared", None))  # label removed
    assert s.slices_for("ns", "api") == []


def test_deleting_a_slice_removes_it_from_the_index() -> None:
    s = Store()
    s.upsert(es("web-a", "web"))
    s.upsert(es("web-b", "web"))
    removed = s.delete(ObjectRef("EndpointSlice", "ns", "web-a"))
    assert removed is not None
    assert names(s.slices_for("ns", "web")) == ["web-b"]
    s.delete(ObjectRef("EndpointSlice", "ns", "web-b"))
    assert s.slices_for("ns", "web") == []
    assert s.count("EndpointSlice") == 0


def test_deleting_something_absent_returns_none() -> None:
    s = Store()
    assert s.delete(ObjectRef("Service", "ns", "ghost")) is None
    assert s.delete(ObjectRef("EndpointSlice", "ns", "ghost")) is None


def test_delete_returns_the_last_version() -> None:
    s = Store()
    svc = {"kind": "Service", "metadata": {"name": "web", "namespace": "ns"}}
    s.upsert(svc)
    assert s.delete(ObjectRef("Service", "ns", "web")) == svc
    assert s.get("Service", "ns", "web") is None


@pytest.mark.parametrize("labels", [["web"], "web", {"kubernetes.io/service-name": ["web"]}])
def test_a_slice_with_malformed_labels_belongs_to_no_service(labels: object) -> None:
    """Manifests mode hands over whatever was written; ``labels.get`` on a list raised."""
    s = Store()
    bad = es("web-bad", "web")
    bad["metadata"]["labels"] = labels
    s.upsert(bad)
    assert s.slices_for("ns", "web") == []
    s.delete(ObjectRef("EndpointSlice", "ns", "web-bad"))
    assert s.get("EndpointSlice", "ns", "web-bad") is None
