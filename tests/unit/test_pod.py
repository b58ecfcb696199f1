"""ferryman.resources.pod: a pod's gates and conditions, and when a gated pod is
routed to; the store keeps pods slim and finds them by address."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ferryman.engine.store import Store
from ferryman.resources.meta import InvalidResource, ObjectRef
from ferryman.resources.pod import (
    Pod,
    gate_pending,
    parse_pod,
    routable_gated,
    routable_while_gated,
)
from ferryman.resources.raw import pack, slim
from testkit.pods import GATE, OTHER_GATE, pod_obj
from testkit.strategies import mutations

FUZZ = settings(max_examples=300, deadline=None)


def test_a_pod_parses_to_its_gates_conditions_and_addresses() -> None:
    pod = parse_pod(pod_obj(gates=(GATE, OTHER_GATE), conditions={"Ready": "False"}))
    assert pod == Pod(
        "ns",
        "web-1",
        "uid-web-1",
        {"app": "web"},
        ("10.0.0.1",),
        (GATE, OTHER_GATE),
        {"Ready": False},
    )
    assert parse_pod(pod_obj(deleting=True)).deleting


def test_addresses_are_kept_as_endpoint_slices_write_them() -> None:
    obj = pod_obj(ip="fd00:0:0::0001")
    assert parse_pod(obj).ips == ("fd00::1",)
    del obj["status"]["podIPs"]
    assert parse_pod(obj).ips == ("fd00::1",)  # status.podIP alone, as older kubelets wrote


def test_slim_keeps_what_gates_read_and_drops_the_rest() -> None:
    kept = slim(pod_obj(deleting=True))
    assert set(kept["metadata"]) == {
        "name", "namespace", "uid", "resourceVersion", "creationTimestamp", "labels",
        "deletionTimestamp",
    }  # fmt: skip
    assert kept["spec"] == {"readinessGates": [{"conditionType": GATE}]}
    assert set(kept["status"]) == {"podIP", "podIPs", "conditions"}
    assert len(pack(pod_obj())._data or b"") < 600  # the memory a watched pod costs


STATUSES = st.sampled_from(["True", "False", "Unknown", None])
CONDITION_TYPES = st.sampled_from(["ContainersReady", "Ready", GATE, OTHER_GATE, "x.io/y"])


@FUZZ
@given(
    gates=st.lists(st.sampled_from([GATE, OTHER_GATE, "x.io/y"]), unique=True, max_size=3),
    conditions=st.dictionaries(CONDITION_TYPES, STATUSES, max_size=5),
    deleting=st.booleans(),
)
def test_routable_while_gated_is_ready_in_all_but_ferrymans_pending_gate(
    gates: list[str], conditions: dict[str, str | None], deleting: bool
) -> None:
    obj = pod_obj(gates=tuple(gates), deleting=deleting)
    obj["status"]["conditions"] = [
        {"type": t} if s is None else {"type": t, "status": s} for t, s in conditions.items()
    ]
    pod = parse_pod(obj)
    true = {t for t, s in conditions.items() if s == "True"}
    others_true = all(g in true for g in gates if g != GATE)
    expected = (
        GATE in gates
        and GATE not in true
        and "ContainersReady" in true
        and others_true
        and not deleting
    )
    assert routable_while_gated(pod, "ferryman") == expected
    assert gate_pending(pod, "ferryman") == (GATE in gates and GATE not in true)
    # Routing also keeps a pod whose gate just turned True (its endpoint says
    # ready only once the EndpointSlice controller catches up).
    assert routable_gated(pod, "ferryman") == (
        GATE in gates and "ContainersReady" in true and others_true and not deleting
    )
    # Another class's gate is not ferryman's to wait for.
    assert not routable_while_gated(pod, "other")


@FUZZ
@given(obj=mutations(pod_obj(gates=(GATE, OTHER_GATE), deleting=True)))
def test_a_malformed_pod_parses_the_same_from_the_store_or_not_at_all(obj: Any) -> None:
    def outcome(o: Any) -> object:
        try:
            return parse_pod(o)
        except InvalidResource as e:
            return e.errors

    assert outcome(pack(obj).unpack()) == outcome(obj)


def test_the_store_finds_pods_by_address() -> None:
    s = Store()
    s.upsert(pod_obj("a", "10.0.0.1"))
    s.upsert(pod_obj("b", "10.0.0.1"))  # host network: the node's address
    s.upsert(pod_obj("c", "10.0.0.2", namespace="other"))
    assert [p["metadata"]["name"] for p in s.pods_at("ns", "10.0.0.1")] == ["a", "b"]
    assert s.pods_at("ns", "10.0.0.2") == []
    moved = copy.deepcopy(pod_obj("a", "10.0.0.3"))
    s.upsert(moved)
    assert [p["metadata"]["name"] for p in s.pods_at("ns", "10.0.0.1")] == ["b"]
    assert [p["metadata"]["name"] for p in s.pods_at("ns", "10.0.0.3")] == ["a"]
    s.delete(ObjectRef("Pod", "ns", "b"))
    assert s.pods_at("ns", "10.0.0.1") == []
    assert s.pods_at("other", "10.0.0.2")[0]["metadata"]["name"] == "c"
