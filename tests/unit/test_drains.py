"""Machine drains: which hooks ferryman keeps, when a drain is done (drains.decide),
the replicas' reports (drains.replica), and the controller taking a leaving
Node's endpoints out of rotation (EndpointSets)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferryman.drains import decide
from ferryman.drains.decide import DrainReport, Patch, Step, machine_view, our_hook
from ferryman.drains.replica import decode, encode
from ferryman.engine.settings import DrainSettings
from ferryman.machines.hooks import Hook, hooks_of
from testkit.controller_kit import Kit
from testkit.harness import ingress, path, rule

OURS = {"name": "IngressTrafficDrain", "owner": "ferryman.io/ingress-controller"}
FOREIGN = {"name": "etcd-quorum", "owner": "etcd-operator"}
CAPI_KEY = "pre-drain.delete.hook.machine.cluster.x-k8s.io/IngressTrafficDrain"


def machine(
    node: str = "n1",
    deleting: bool = False,
    pre_drain: list[dict[str, str]] | None = None,
    pre_terminate: list[dict[str, str]] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    hooks: dict[str, Any] = {}
    if pre_drain is not None:
        hooks["preDrain"] = pre_drain
    if pre_terminate is not None:
        hooks["preTerminate"] = pre_terminate
    md: dict[str, Any] = {"name": "m1", "namespace": "machines", "uid": "u1"}
    md["resourceVersion"] = "7"
    if annotations:
        md["annotations"] = annotations
    if deleting:
        md["deletionTimestamp"] = "2026-11-23T10:00:00Z"
    return {
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "Machine",
        "metadata": md,
        "spec": {"lifecycleHooks": hooks},
        "status": {"nodeRef": {"kind": "Node", "name": node}} if node else {},
    }


def view(obj: dict[str, Any], since: float | None = None) -> decide.MachineView:
    deleting = (
        since
        if since is not None
        else (100.0 if obj["metadata"].get("deletionTimestamp") else None)
    )
    v = machine_view(obj, deleting)
    assert v is not None
    return v


def patched(obj: dict[str, Any], step: Step) -> dict[str, Any]:
    """The Machine after the step's merge patch (what the API server would hold)."""
    body = step.patch_for(obj)
    return decide._applied(obj, body) if body else obj


# ---------------------------------------------------------------- keeping hooks


def test_a_node_with_served_endpoints_gets_the_pre_drain_hook_and_only_that() -> None:
    obj = machine(pre_drain=[FOREIGN])
    step = decide.keep(view(obj), "openshift", frozenset({"n1"}), frozenset())
    after = patched(obj, step)
    assert after["spec"]["lifecycleHooks"]["preDrain"] == [FOREIGN, OURS]
    assert "preTerminate" not in after["spec"]["lifecycleHooks"]


def test_a_node_running_a_replica_gets_both_hooks() -> None:
    obj = machine()
    step = decide.keep(view(obj), "openshift", frozenset(), frozenset({"n1"}))
    hooks = patched(obj, step)["spec"]["lifecycleHooks"]
    assert hooks == {"preDrain": [OURS], "preTerminate": [OURS]}


def test_hooks_go_when_the_node_no_longer_needs_them_and_foreign_ones_stay() -> None:
    obj = machine(pre_drain=[FOREIGN, OURS], pre_terminate=[OURS])
    step = decide.keep(view(obj), "openshift", frozenset(), frozenset())
    hooks = patched(obj, step)["spec"]["lifecycleHooks"]
    assert hooks.get("preDrain") == [FOREIGN]
    assert not hooks.get("preTerminate")


def test_a_hook_of_our_name_with_another_owner_is_put_right() -> None:
    wrong = {"name": "IngressTrafficDrain", "owner": "someone-else"}
    obj = machine(pre_drain=[wrong, FOREIGN])
    step = decide.keep(view(obj), "openshift", frozenset({"n1"}), frozenset())
    assert patched(obj, step)["spec"]["lifecycleHooks"]["preDrain"] == [OURS, FOREIGN]


def test_a_machine_without_a_node_and_one_already_kept_need_no_write() -> None:
    assert decide.keep(view(machine(node="")), "openshift", frozenset({""}), frozenset()) == Step()
    kept = machine(pre_drain=[OURS])
    assert (
        decide.keep(view(kept), "openshift", frozenset({"n1"}), frozenset()).patch_for(kept) is None
    )


def test_cluster_api_hooks_are_annotations() -> None:
    obj = machine(annotations={"pre-drain.delete.hook.machine.cluster.x-k8s.io/etcd": "etcd"})
    step = decide.keep(view(obj), "cluster-api", frozenset({"n1"}), frozenset())
    after = patched(obj, step)
    assert after["metadata"]["annotations"][CAPI_KEY] == "ferryman.io/ingress-controller"
    assert after["spec"]["lifecycleHooks"] == {}
    assert our_hook("cluster-api") in hooks_of(after).pre_drain


def test_no_hook_is_ever_added_to_a_machine_being_deleted() -> None:
    obj = machine(deleting=True, pre_drain=[FOREIGN])
    live = [DrainReport("r1", "n2", True)]
    step = decide.drain(view(obj), "openshift", live, 150.0, 300.0, False, None)
    assert step.patches == ()
    assert step.notice is None  # not ours to drain


# ---------------------------------------------------------------- draining


def applied(identity: str, in_flight: int | None, node: str = "n2", **kw: Any) -> DrainReport:
    return DrainReport(
        identity, node, kw.pop("ready", True), frozenset({"n1"}), {"n1": in_flight}, **kw
    )


def drain(
    live: list[DrainReport],
    now: float = 150.0,
    announced: bool = True,
    quiet: float | None = 140.0,
) -> Step:
    obj = machine(deleting=True, pre_drain=[FOREIGN, OURS], pre_terminate=[OURS])
    return decide.drain(view(obj), "openshift", live, now, 300.0, announced, None, quiet)


def test_a_drain_ends_only_after_looking_drained_for_a_second() -> None:
    live = [applied("r1", 0), applied("r2", 0)]
    assert drain(live, now=150.0, quiet=149.5) == Step()
    assert drain(live, now=150.0, quiet=None) == Step()
    assert drain(live, now=150.0, quiet=149.0).result == "drained"


def test_the_first_look_at_a_deletion_says_draining_and_holds() -> None:
    step = drain([applied("r1", 0), DrainReport("r2", "n3", True)], announced=False)
    assert step.patches == ()
    assert step.notice is not None and step.notice.reason == "IngressTrafficDraining"
    assert "(at most 300s)" in step.notice.message


def test_the_hook_goes_once_every_replica_applied_and_counts_nothing_in_flight() -> None:
    step = drain([applied("r1", 0), applied("r2", 0)])
    assert step.patches == (Patch("preDrain", our_hook("openshift"), False),)
    assert step.notice is not None
    assert (step.notice.type, step.notice.reason) == ("Normal", "IngressTrafficDrained")
    assert step.result == "drained"
    after = patched(machine(deleting=True, pre_drain=[FOREIGN, OURS]), step)
    assert after["spec"]["lifecycleHooks"]["preDrain"] == [FOREIGN]


@pytest.mark.parametrize(
    "live",
    [
        [applied("r1", 0), applied("r2", 2)],  # requests still in flight
        [applied("r1", 0), applied("r2", None)],  # a data plane that cannot count
        [applied("r1", 0), DrainReport("r2", "n3", True)],  # not applied yet
        [applied("r1", 0), applied("r2", 0, node="n1", ready=True)],  # the Node's replica ready
        [applied("r1", 0), applied("r2", 0, node="n1", ready=False, replica_in_flight=3)],
        [applied("r1", 0), applied("r2", 0, node="n1", ready=False)],  # replica not measured
        [],  # nobody reports
    ],
)
def test_the_hook_stays_while_anything_is_not_drained(live: list[DrainReport]) -> None:
    assert drain(live) == Step()


def test_the_nodes_own_replica_out_of_rotation_and_idle_counts_as_drained() -> None:
    step = drain([applied("r1", 0), applied("r2", 0, node="n1", ready=False, replica_in_flight=0)])
    assert step.result == "drained"


def test_the_timeout_releases_the_hook_with_a_warning_saying_what_was_left() -> None:
    step = drain([applied("r1", 0), applied("r2", 4)], now=100.0 + 300.0)
    assert step.result == "timed_out"
    assert step.notice is not None and step.notice.type == "Warning"
    assert step.notice.reason == "IngressTrafficDrainTimedOut"
    assert "r2: 4 in flight to the Node's endpoints" in step.notice.message
    assert step.patches == (Patch("preDrain", our_hook("openshift"), False),)


def test_no_timeout_when_it_is_zero() -> None:
    obj = machine(deleting=True, pre_drain=[OURS])
    live = [applied("r1", 5)]
    assert decide.drain(view(obj), "openshift", live, 1e9, 0.0, True, None) == Step()


def test_pre_terminate_holds_until_no_replica_runs_on_the_node_or_the_timeout() -> None:
    obj = machine(deleting=True, pre_drain=[FOREIGN], pre_terminate=[OURS])
    running = [DrainReport("r1", "n1", False)]
    assert decide.drain(view(obj), "openshift", running, 150.0, 300.0, True, 140.0) == Step()
    late = decide.drain(view(obj), "openshift", running, 440.0, 300.0, True, 140.0)
    assert late.notice is not None and late.notice.reason == "IngressReplicaStopTimedOut"
    gone = decide.drain(
        view(obj), "openshift", [DrainReport("r2", "n2", True)], 150.0, 300.0, True, 140.0
    )
    assert gone.notice is not None and gone.notice.reason == "IngressReplicaStopped"
    assert gone.patches == (Patch("preTerminate", our_hook("openshift"), False),)


def test_leaving_nodes_are_those_of_machines_being_deleted() -> None:
    views = [
        view(machine("n1", deleting=True)),
        view(machine("n2")),
        view(machine("", deleting=True)),
    ]
    assert decide.leaving_nodes(views) == frozenset({"n1"})


# ---------------------------------------------------------------- reports


@given(
    st.builds(
        DrainReport,
        st.just("r"),
        st.text(max_size=10),
        st.booleans(),
        st.frozensets(st.text(min_size=1, max_size=5), max_size=3),
        st.dictionaries(st.text(max_size=5), st.none() | st.integers(0, 10**6), max_size=3),
        st.none() | st.integers(0, 10**6),
    )
)
def test_a_report_reads_back_as_written(report: DrainReport) -> None:
    assert decode("r", encode(report)) == report


@pytest.mark.parametrize("text", [None, "", "[]", "{", '"x"'])
def test_an_unreadable_report_is_none(text: str | None) -> None:
    assert decode("r", text) is None


def test_a_negative_or_odd_count_reads_as_not_measured() -> None:
    report = decode("r", '{"node":"n","applied":["n1"],"inFlight":{"n1":-1},"replicaInFlight":"x"}')
    assert report is not None
    assert report.in_flight == {"n1": None} and report.replica_in_flight is None


# ---------------------------------------------------------------- the controller


def slice_on(**nodes: str) -> dict[str, Any]:
    """An EndpointSlice of Service web: address -> the Node it runs on."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "web-1",
            "namespace": "ns",
            "labels": {"kubernetes.io/service-name": "web"},
        },
        "addressType": "IPv4",
        "ports": [{"port": 8080}],
        "endpoints": [
            {"addresses": [a.replace("_", ".")], "conditions": {"ready": True}, "nodeName": n}
            for a, n in nodes.items()
        ],
    }


SERVICE = {
    "kind": "Service",
    "metadata": {"name": "web", "namespace": "ns"},
    "spec": {"ports": [{"port": 80}]},
}


@pytest.fixture
def kit(tmp_path: Path) -> Kit:
    k = Kit(tmp_path, drain=DrainSettings(machine_hooks="openshift"))
    k.add(SERVICE, ingress("web", [rule("a.test", path("/", "web"))], namespace="ns"))
    return k


def record(k: Kit) -> str | None:
    return k.dataplane.records.get(("E", "ns/web:80"))


def test_a_leaving_nodes_endpoints_leave_rotation_and_come_back(kit: Kit) -> None:
    kit.add(slice_on(**{"10_0_0_1": "n1", "10_0_0_2": "n2", "10_0_0_3": "n1"}))
    asyncio.run(kit.drain())
    assert kit.controller.nodes_in_use() == {"n1", "n2"}
    assert record(kit) == "10.0.0.1#8080 10.0.0.2#8080 10.0.0.3#8080"
    kit.controller.set_leaving_nodes(frozenset({"n1"}))
    assert kit.controller.leaving_applied() == frozenset()
    asyncio.run(kit.drain())
    assert record(kit) == "10.0.0.2#8080"
    assert kit.controller.leaving_applied() == {"n1"}
    assert kit.controller.left_addresses("n1") == {"10.0.0.1", "10.0.0.3"}
    kit.controller.set_leaving_nodes(frozenset())
    asyncio.run(kit.drain())
    assert record(kit) == "10.0.0.1#8080 10.0.0.2#8080 10.0.0.3#8080"
    assert kit.controller.leaving_applied() == frozenset()
    assert kit.controller.left_addresses("n1") == frozenset()


def test_the_last_ready_endpoints_stay_though_their_node_leaves(kit: Kit) -> None:
    kit.add(slice_on(**{"10_0_0_1": "n1"}))
    asyncio.run(kit.drain())
    kit.controller.set_leaving_nodes(frozenset({"n1"}))
    asyncio.run(kit.drain())
    assert record(kit) == "10.0.0.1#8080"  # not a 503 before the drain evicts it
    assert kit.controller.leaving_applied() == {"n1"}
    assert kit.controller.left_addresses("n1") == frozenset()  # nothing to wait for


def test_without_hooks_nodes_are_not_followed(tmp_path: Path) -> None:
    k = Kit(tmp_path)
    k.add(SERVICE, ingress("web", [rule("a.test", path("/", "web"))], namespace="ns"))
    k.add(slice_on(**{"10_0_0_1": "n1"}))
    asyncio.run(k.drain())
    assert k.controller.nodes_in_use() == frozenset()


def test_a_foreign_hook_is_never_touched_by_any_step() -> None:
    hooks = hooks_of(machine(pre_drain=[FOREIGN]))
    assert Hook("etcd-quorum", "etcd-operator") in hooks.pre_drain


def drain_capped(live: list[DrainReport], now: float, cap: float) -> Step:
    obj = machine(deleting=True, pre_drain=[FOREIGN, OURS], pre_terminate=[OURS])
    return decide.drain(
        view(obj), "openshift", live, now, 300.0, True, None, 140.0, in_flight_timeout=cap
    )


ONLY_IN_FLIGHT = [
    [applied("r1", 0), applied("r2", 2)],
    [applied("r1", 0), applied("r2", None)],
    [applied("r1", 0), applied("r2", 0, node="n1", ready=False, replica_in_flight=3)],
    [applied("r1", 0), applied("r2", 0, node="n1", ready=False)],
]
STILL_IN_ROTATION = [
    [applied("r1", 0), DrainReport("r2", "n3", True)],
    [applied("r1", 0), applied("r2", 0, node="n1", ready=True)],
    [],
]


@given(
    st.sampled_from(ONLY_IN_FLIGHT + STILL_IN_ROTATION),
    st.floats(0, 299),
    st.sampled_from([0.0, 10.0, 60.0]),
)
def test_the_in_flight_cap_ends_only_the_wait_for_requests_in_flight(
    live: list[DrainReport], elapsed: float, cap: float
) -> None:
    """A slow request held the drain to --machine-drain-timeout; the cap lets it
    go once the Node is out of rotation everywhere, never before."""
    step = drain_capped(live, 100.0 + elapsed, cap)
    if 0 < cap <= elapsed and live in ONLY_IN_FLIGHT:
        assert step.result == "in_flight_timed_out"
        assert step.patches == (Patch("preDrain", our_hook("openshift"), False),)
        assert step.notice is not None and step.notice.type == "Warning"
        assert step.notice.reason == "IngressTrafficDrainInFlightTimedOut"
    else:
        assert step == Step()
