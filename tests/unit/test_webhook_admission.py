"""The readiness gate webhook's decision: AdmissionReview in, JSONPatch out."""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Mapping
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ferryman.engine.store import Store
from ferryman.resources.meta import ObjectRef
from ferryman.resources.readiness_gate import INJECT_LABEL, gate_type
from ferryman.resources.service import Service
from ferryman.webhook.admission import (
    ERROR,
    INJECTED,
    OPT_OUT,
    UNCHANGED,
    CachedServices,
    Injector,
)
from testkit.strategies import yaml_values

GATE = gate_type("ferryman")
keys = st.sampled_from(["app", "tier", "team", INJECT_LABEL])
values = st.sampled_from(["web", "db", "a", "enabled", OPT_OUT])
label_maps = st.dictionaries(keys, values, max_size=3)
gate_lists = st.none() | st.lists(
    st.sampled_from([GATE, gate_type("other"), "example.com/ready"]).map(
        lambda t: {"conditionType": t}
    ),
    max_size=3,
)


def _review(pod: Mapping[str, Any], namespace: str = "apps", **request: Any) -> dict[str, Any]:
    base = {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": namespace,
        "operation": "CREATE",
        "object": pod,
    }
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}
    return review | {"request": base | request}


def _pod(labels: Mapping[str, str], gates: list[dict[str, str]] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i"}]}
    if gates is not None:
        spec["readinessGates"] = gates
    # At CREATE a ReplicaSet's pod has only generateName and no namespace.
    return {"metadata": {"generateName": "web-", "labels": dict(labels)}, "spec": spec}


def _apply(pod: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 "add", as far as the webhook uses it (enough to check its patches)."""
    out = copy.deepcopy(pod)
    for op in patch:
        assert op["op"] == "add"
        *parents, last = op["path"].lstrip("/").split("/")
        node: Any = out
        for p in parents:
            node = node[p]
        if last == "-":
            node.append(op["value"])
        else:
            node[last] = op["value"]
    return out


def _patch(outcome_review: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    assert outcome_review is not None
    response = outcome_review["response"]
    assert response["allowed"] is True
    if "patch" not in response:
        return None
    assert response["patchType"] == "JSONPatch"
    return list(json.loads(base64.b64decode(response["patch"])))


def _injector(selectors: list[dict[str, str] | None], opted: bool | None = None) -> Injector:
    services = [Service("apps", f"s{i}", (), sel) for i, sel in enumerate(selectors)]
    return Injector(
        "ferryman",
        lambda ns: services if ns == "apps" else [],
        lambda ns: opted,
    )


@given(
    selectors=st.lists(st.none() | label_maps, max_size=3),
    labels=label_maps,
    gates=gate_lists,
    opted=st.sampled_from([True, False, None]),
)
def test_the_gate_is_added_once_exactly_when_a_served_service_selects_the_pod(
    selectors: list[dict[str, str] | None],
    labels: dict[str, str],
    gates: list[dict[str, str]] | None,
    opted: bool | None,
) -> None:
    injector = _injector(selectors, opted)
    pod = _pod(labels, gates)
    outcome = injector.review(_review(pod))
    assert outcome.review is not None
    assert outcome.review["response"]["uid"] == "705ab4f5-6393-11e8-b7cc-42010a800002"
    patch = _patch(outcome.review)
    after = _apply(pod, patch or [])

    selected = any(sel and all(labels.get(k) == v for k, v in sel.items()) for sel in selectors)
    wanted = selected and opted is not False and labels.get(INJECT_LABEL) != OPT_OUT
    before = [g["conditionType"] for g in gates or []]
    now = [g["conditionType"] for g in after["spec"].get("readinessGates") or []]
    if GATE in before:
        assert patch is None  # an existing gate is left alone
    elif wanted:
        assert now == [*before, GATE]  # appended; the others kept, in order
    else:
        assert patch is None
    assert outcome.result == (INJECTED if patch else UNCHANGED)
    # Idempotent: the patched pod reviewed again needs nothing more.
    assert _patch(injector.review(_review(after)).review) is None


def test_the_patch_creates_the_list_when_absent_or_empty_and_appends_otherwise() -> None:
    injector = _injector([{"app": "web"}])
    other = {"conditionType": "example.com/ready"}
    cases = {
        None: [{"op": "add", "path": "/spec/readinessGates", "value": [{"conditionType": GATE}]}],
        (): [{"op": "add", "path": "/spec/readinessGates", "value": [{"conditionType": GATE}]}],
        (1,): [{"op": "add", "path": "/spec/readinessGates/-", "value": {"conditionType": GATE}}],
    }
    for gates, expected in cases.items():
        pod = _pod({"app": "web"}, None if gates is None else [other] * len(gates))
        assert _patch(injector.review(_review(pod)).review) == expected


def test_only_the_requests_namespace_counts() -> None:
    """At CREATE the pod's metadata.namespace may be empty or absent: the request's
    namespace picks the Services, never the pod's."""
    injector = _injector([{"app": "web"}])
    pod = _pod({"app": "web"}, None)
    pod["metadata"]["namespace"] = "apps"
    assert _patch(injector.review(_review(pod, namespace="elsewhere")).review) is None
    del pod["metadata"]["namespace"]
    assert _patch(injector.review(_review(pod, namespace="apps")).review) is not None


def test_other_requests_are_allowed_unchanged() -> None:
    injector = _injector([{"app": "web"}])
    pod = _pod({"app": "web"}, None)
    for request in (
        {"operation": "UPDATE"},
        {"kind": {"group": "", "version": "v1", "kind": "Service"}},
        {"kind": {"group": "apps", "version": "v1", "kind": "Pod"}},
        {"subResource": "status"},
        {"namespace": ""},
        {"object": None},
    ):
        outcome = injector.review(_review(pod, **request))
        assert _patch(outcome.review) is None, request
        assert outcome.result == UNCHANGED


@given(document=yaml_values)
def test_any_document_is_answered_without_error_or_refused(document: object) -> None:
    """Whatever arrives: a review with a uid is allowed; without one, HTTP 400."""
    injector = _injector([{"app": "web"}])
    for doc in (document, _review(document if isinstance(document, dict) else {}),
                {"request": {"uid": "u", "kind": document, "object": document}}):  # fmt: skip
        outcome = injector.review(doc)
        if outcome.review is None:
            assert outcome.result == ERROR
        else:
            assert outcome.review["response"]["allowed"] is True


def test_an_internal_error_costs_the_gate_not_the_pod() -> None:
    def broken(namespace: str) -> list[Service]:
        raise RuntimeError("cache bug")

    outcome = Injector("ferryman", broken).review(_review(_pod({"app": "web"}, None)))
    assert outcome.result == ERROR
    assert outcome.review is not None
    assert outcome.review["response"] == {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "allowed": True,
    }


def test_the_gate_names_the_ingress_class() -> None:
    injector = Injector("edge", lambda ns: [Service("apps", "s", (), {"app": "web"})])
    patch = _patch(injector.review(_review(_pod({"app": "web"}, None))).review)
    assert patch == [
        {
            "op": "add",
            "path": "/spec/readinessGates",
            "value": [{"conditionType": "target-health.ferryman.io/edge"}],
        }
    ]


def test_cached_services_reads_only_served_services_from_the_store() -> None:
    store = Store()
    for name, spec in (
        ("web", {"selector": {"app": "web"}}),
        ("unserved", {"selector": {"app": "x"}}),
        ("broken", "not a spec"),
    ):
        store.upsert({"kind": "Service", "metadata": {"namespace": "apps", "name": name},
                      "spec": spec})  # fmt: skip
    reads: list[str] = []

    def get(kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        reads.append(name)
        return store.get(kind, namespace, name)

    served = {"web", "broken", "missing"}
    services = CachedServices(lambda ns: frozenset(served), get, store.stamp)
    assert [(s.name, s.selector) for s in services("apps")] == [("web", {"app": "web"})]
    assert sorted(reads) == ["broken", "web"]
    # Asked again: nothing re-read until a Service changes.
    reads.clear()
    assert [s.name for s in services("apps")] == ["web"]
    assert reads == []
    store.upsert({"kind": "Service", "metadata": {"namespace": "apps", "name": "web"},
                  "spec": {"selector": {"app": "shop"}}})  # fmt: skip
    assert [s.selector for s in services("apps")] == [{"app": "shop"}]
    assert reads == ["web"]
    # No longer served, or deleted: gone.
    served.discard("web")
    assert services("apps") == []
    served.add("web")
    store.delete(ObjectRef("Service", "apps", "web"))
    assert services("apps") == []
