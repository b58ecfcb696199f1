"""What the machine controller writes and does next, decided from the Machine alone."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ferryman.machines import conditions
from ferryman.machines.drain import PodKey, to_evict
from ferryman.machines.hooks import Hook, Hooks
from ferryman.machines.lifecycle import FINALIZER, Step, next_step, status_patch
from ferryman.machines.webhook import review

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"
FERRYMAN = {"name": "ferryman-traffic", "owner": "ferryman"}


def machine(
    *,
    deleting: bool = False,
    finalizer: bool = True,
    node: str | None = "node-1",
    pre_drain: list[dict[str, str]] | None = None,
    pre_terminate: list[dict[str, str]] | None = None,
    drained: str | None = None,
    annotations: dict[str, str] | None = None,
    phase: str = "Running",
) -> dict[str, Any]:
    md: dict[str, Any] = {"name": "m", "namespace": "ns", "annotations": annotations or {}}
    if deleting:
        md["deletionTimestamp"] = T0
    if finalizer:
        md["finalizers"] = ["other", FINALIZER]
    status: dict[str, Any] = {"phase": phase, "conditions": []}
    if node:
        status["nodeRef"] = {"kind": "Node", "name": node}
    if drained:
        status["conditions"].append(
            {"type": "Drained", "status": drained, "lastTransitionTime": T0}
        )
    hooks = {"preDrain": pre_drain or [], "preTerminate": pre_terminate or []}
    return {"metadata": md, "spec": {"lifecycleHooks": hooks}, "status": status}


def test_a_live_machine_gets_the_finalizer_and_nothing_else() -> None:
    assert next_step(machine(finalizer=False)) is Step.ADD_FINALIZER
    assert next_step(machine(pre_drain=[FERRYMAN])) is Step.NOTHING


def test_deletion_follows_the_machine_apis_order() -> None:
    assert next_step(machine(deleting=True, pre_drain=[FERRYMAN], pre_terminate=[FERRYMAN])) is (
        Step.DRAIN_BLOCKED
    )
    assert next_step(machine(deleting=True, pre_terminate=[FERRYMAN])) is Step.DRAIN
    # A failed round (Drained False) is tried again.
    assert next_step(machine(deleting=True, drained="False")) is Step.DRAIN
    assert next_step(machine(deleting=True, drained="True", pre_terminate=[FERRYMAN])) is (
        Step.TERMINATE_BLOCKED
    )
    assert next_step(machine(deleting=True, drained="True")) is Step.TERMINATE
    assert next_step(machine(deleting=True, finalizer=False)) is Step.NOTHING


def test_no_node_or_the_exclude_annotation_skips_the_drain_even_with_hooks() -> None:
    # As the Machine API: pre-drain hooks guard a drain; with none to do, they do not block.
    assert next_step(machine(deleting=True, node=None, pre_drain=[FERRYMAN])) is Step.DRAIN_SKIPPED
    excluded = {"machine.openshift.io/exclude-node-draining": ""}
    assert next_step(machine(deleting=True, annotations=excluded)) is Step.DRAIN_SKIPPED


def test_hook_conditions_name_every_blocking_hook() -> None:
    hooks = Hooks(
        pre_drain=(Hook("a", "x"), Hook("b", "y", annotation=True)),
        pre_terminate=(),
    )
    assert conditions.hook_conditions(hooks) == (
        {
            "type": "Drainable",
            "status": "False",
            "reason": "HookPresent",
            "severity": "Warning",
            "message": "Drain operation currently blocked by: [{Name:a Owner:x} {Name:b Owner:y}]",
        },
        {"type": "Terminable", "status": "True"},
    )
    assert conditions.drain_failed("boom") == {
        "type": "Drained",
        "status": "False",
        "reason": "DrainError",
        "severity": "Warning",
        "message": "could not drain machine: boom",
    }


def test_status_sets_deleting_and_conditions_once() -> None:
    m = machine(deleting=True, pre_terminate=[FERRYMAN], drained="False")
    patch = status_patch(m, T1)
    assert patch is not None
    assert patch["phase"] == "Deleting"
    assert [(c["type"], c["status"], c["lastTransitionTime"]) for c in patch["conditions"]] == [
        ("Drainable", "True", T1),
        ("Drained", "False", T0),  # untouched
        ("Terminable", "False", T1),
    ]
    m["status"].update(patch)
    assert status_patch(m, "2026-01-01T00:02:00Z") is None


states = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["Drainable", "Terminable", "Drained", "Other"]),
        "status": st.sampled_from(["True", "False", "Unknown"]),
        "reason": st.sampled_from(["", "HookPresent", "DrainError"]),
        "message": st.sampled_from(["", "a", "b"]),
    }
)


@given(
    st.lists(states, unique_by=lambda c: c["type"]), st.lists(states, unique_by=lambda c: c["type"])
)
def test_a_transition_time_moves_only_when_the_state_does(current: Any, wanted: Any) -> None:
    before = [{**c, "lastTransitionTime": T0} for c in current]
    after = conditions.merged(before, wanted, T1)
    assert [c["type"] for c in after] == sorted({c["type"] for c in current + wanted})
    old = {c["type"]: c for c in before}
    for c in after:
        w = next((w for w in wanted if w["type"] == c["type"]), None)
        if w is None:
            assert c == old[c["type"]]
        else:
            same = c["type"] in old and all(old[c["type"]][k] == w[k] for k in w)
            assert c["lastTransitionTime"] == (T0 if same else T1)
    assert conditions.merged(after, wanted, "later") == after


def test_drain_leaves_daemonset_and_mirror_pods() -> None:
    def pod(name: str, **md: Any) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "ns", "uid": name, **md}}

    pods = [
        pod("web"),
        pod("rs", ownerReferences=[{"kind": "ReplicaSet", "controller": True}]),
        pod("ds", ownerReferences=[{"kind": "DaemonSet", "controller": True}]),
        pod("ds-not-controller", ownerReferences=[{"kind": "DaemonSet"}]),
        pod("static", annotations={"kubernetes.io/config.mirror": "abc"}),
    ]
    assert to_evict(pods) == [
        PodKey("ns", "web", "web"),
        PodKey("ns", "rs", "rs"),
        PodKey("ns", "ds-not-controller", "ds-not-controller"),
    ]


def test_the_webhook_answers_with_the_machine_apis_denial() -> None:
    old = machine(deleting=True, pre_drain=[FERRYMAN])
    new = machine(deleting=True, pre_drain=[FERRYMAN, {"name": "x-y", "owner": "me"}])
    request = {"uid": "u1", "operation": "UPDATE", "oldObject": old, "object": new}
    answer = review({"request": request})
    assert answer["response"] == {
        "uid": "u1",
        "allowed": False,
        "status": {
            "code": 403,
            "reason": "Forbidden",
            "message": "spec.lifecycleHooks.preDrain: Forbidden: pre-drain hooks are immutable "
            "when machine is marked for deletion: the following hooks are new or changed: "
            "[{Name:x-y Owner:me}]",
        },
    }
    released = {**request, "object": machine(deleting=True)}
    assert review({"request": released})["response"] == {"uid": "u1", "allowed": True}
    assert review({"request": {**request, "operation": "CREATE"}})["response"]["allowed"]


@given(
    deleting=st.booleans(),
    finalizer=st.booleans(),
    node=st.sampled_from([None, "node-1"]),
    pre_drain=st.booleans(),
    pre_terminate=st.booleans(),
    drained=st.sampled_from([None, "True", "False"]),
    exclude=st.booleans(),
    capi=st.booleans(),
)
def test_no_step_passes_a_hook_or_skips_ahead(
    deleting: bool,
    finalizer: bool,
    node: str | None,
    pre_drain: bool,
    pre_terminate: bool,
    drained: str | None,
    exclude: bool,
    capi: bool,
) -> None:
    annotations = {"machine.openshift.io/exclude-node-draining": ""} if exclude else {}
    hook = [FERRYMAN]
    if capi:  # the same hooks, as Cluster API's annotations
        if pre_drain:
            annotations["pre-drain.delete.hook.machine.cluster.x-k8s.io/x"] = "o"
        if pre_terminate:
            annotations["pre-terminate.delete.hook.machine.cluster.x-k8s.io/x"] = "o"
    m = machine(
        deleting=deleting,
        finalizer=finalizer,
        node=node,
        pre_drain=hook if pre_drain and not capi else None,
        pre_terminate=hook if pre_terminate and not capi else None,
        drained=drained,
        annotations=annotations,
    )
    step = next_step(m)
    if not deleting:
        assert step in (Step.ADD_FINALIZER, Step.NOTHING)
        assert (step is Step.ADD_FINALIZER) is not finalizer
    elif not finalizer:
        assert step is Step.NOTHING
    else:
        assert step is not Step.ADD_FINALIZER
    if step is Step.DRAIN:
        assert not pre_drain and node and not exclude and drained != "True"
    if step is Step.TERMINATE:
        assert not pre_terminate and drained == "True"
    if step is Step.DRAIN_SKIPPED:
        assert node is None or exclude
