"""ferryman.report.gateway_status, its pure part: the status an object should
show given what it shows (lastTransitionTime kept while a condition's status
stays, other controllers' route parents kept), and when a write is needed.
The writer against a real API server: tests/kubernetes/test_gateway_status.py."""

from __future__ import annotations

import datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from lightkube import AsyncClient
from lightkube.config.kubeconfig import KubeConfig

from ferryman.report.gateway_status import (
    SWEEP_MIN,
    GatewayStatusWriter,
    desired,
    merge_patch,
    rfc3339,
    shows,
    stamped,
)
from ferryman.resources.meta import ObjectRef
from testkit.gateway_kinds import RESOURCES

OURS = "ferryman.io/gateway-controller"
T0, T1 = "2026-01-01T00:00:00Z", "2026-11-27T15:00:00Z"
GW = ObjectRef("Gateway", "infra", "gw")
ROUTE = ObjectRef("HTTPRoute", "infra", "web")


def cond(type_: str, status: str = "True", **more: Any) -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": type_, "message": "", **more}


def test_rfc3339_is_seconds_in_utc_with_z() -> None:
    plus2 = datetime.timezone(datetime.timedelta(hours=2))
    assert rfc3339(datetime.datetime(2026, 11, 27, 17, 5, 26, 999, tzinfo=plus2)) == (
        "2026-11-27T15:05:26Z"
    )


def test_a_condition_keeps_its_time_while_its_status_stays() -> None:
    have = [
        cond("Accepted", lastTransitionTime=T0),
        cond("Programmed", "False", lastTransitionTime=T0),
    ]
    wanted = [
        cond("Accepted", reason="Other", observedGeneration=2),
        cond("Programmed"),
        cond("New"),
    ]
    out = stamped(wanted, have, T1)
    assert [c["lastTransitionTime"] for c in out] == [T0, T1, T1]
    assert out[0]["reason"] == "Other" and out[0]["observedGeneration"] == 2


def test_a_gateway_and_its_listeners_are_stamped_and_compared() -> None:
    wanted = {
        "conditions": [cond("Accepted", observedGeneration=1)],
        "addresses": [{"type": "IPAddress", "value": "127.0.0.10"}],
        "listeners": [{"name": "http", "attachedRoutes": 1, "conditions": [cond("Programmed")],
                       "supportedKinds": [{"kind": "HTTPRoute"}]}],
    }  # fmt: skip
    default = {
        "conditions": [cond("Accepted", "Unknown", lastTransitionTime="1970-01-01T00:00:00Z")]
    }
    first = desired(GW, wanted, default, OURS, T0)
    assert first["conditions"][0]["lastTransitionTime"] == T0
    assert first["listeners"][0]["supportedKinds"] == [
        {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}
    ]
    assert not shows(GW, default, first)
    # Written; the same again later changes nothing, so nothing is written.
    again = desired(GW, wanted, first, OURS, T1)
    assert again == first and shows(GW, first, again)
    # A generation later: observedGeneration moves, the time stays.
    bumped = {**wanted, "conditions": [cond("Accepted", observedGeneration=2)]}
    later = desired(GW, bumped, first, OURS, T1)
    assert later["conditions"][0] == cond("Accepted", observedGeneration=2, lastTransitionTime=T0)
    assert not shows(GW, first, later)


def test_a_key_no_longer_set_is_removed_by_the_patch() -> None:
    have = {"conditions": [], "addresses": [{"value": "x"}]}
    assert merge_patch(have, {"conditions": []}) == {"conditions": [], "addresses": None}


def parent(controller: str, gateway: str, status: str = "True", **ref: Any) -> dict[str, Any]:
    return {
        "controllerName": controller,
        "parentRef": {"name": gateway, **ref},
        "conditions": [cond("Accepted", status)],
    }


def test_route_parents_of_other_controllers_are_kept() -> None:
    theirs = {
        **parent("example.com/other", "gw"),
        "conditions": [cond("Accepted", lastTransitionTime=T0)],
    }
    mine_before = parent(OURS, "gw", sectionName="http")
    mine_before["conditions"][0]["lastTransitionTime"] = T0
    have = {"parents": [mine_before, theirs, parent(OURS, "gone")]}
    wanted = {"parents": [parent(OURS, "gw", sectionName="http"), parent(OURS, "gw2", "False")]}
    out = desired(ROUTE, wanted, have, OURS, T1)
    assert out["parents"][0] == theirs
    mine = out["parents"][1:]
    assert [p["parentRef"]["name"] for p in mine] == ["gw", "gw2"]  # "gone" is dropped
    assert mine[0]["parentRef"] == {"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                    "name": "gw", "sectionName": "http"}  # fmt: skip
    assert [p["conditions"][0]["lastTransitionTime"] for p in mine] == [T0, T1]
    # The same entries in another order: already shown.
    assert shows(ROUTE, {"parents": [*reversed(mine), theirs]}, out)
    assert not shows(ROUTE, {"parents": mine}, out)


_status = st.sampled_from(["True", "False", "Unknown"])
_conditions = st.lists(
    st.builds(cond, st.sampled_from(["Accepted", "Programmed", "ResolvedRefs"]), _status),
    unique_by=lambda c: c["type"],
)


@given(have=_conditions, wanted=_conditions)
def test_what_was_written_shows_at_once(
    have: list[dict[str, Any]], wanted: list[dict[str, Any]]
) -> None:
    """Idempotence: once written, the same wanted status needs no write, whatever
    the clock says; and a time moves exactly when its condition's status does."""
    before = desired(GW, {"conditions": have}, {}, OURS, T0)
    written = desired(GW, {"conditions": wanted}, before, OURS, T1)
    assert shows(GW, written, desired(GW, {"conditions": wanted}, written, OURS, "later"))
    old = {c["type"]: c["status"] for c in have}
    for c in written["conditions"]:
        assert c["lastTransitionTime"] == (T0 if old.get(c["type"]) == c["status"] else T1)


def test_statuses_of_deleted_objects_are_not_held_for_ever() -> None:
    """Only a write's 404 drops a wanted status; objects deleted after their last
    one are swept once the wanted statuses double, by the store's view."""
    live: set[str] = set()
    # Never called: no replica leads here, so nothing is written.
    config = KubeConfig.from_dict({
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    })  # fmt: skip
    client = AsyncClient(config=config)
    writer = GatewayStatusWriter(
        client, OURS, RESOURCES, read=lambda kind, ns, name: {} if name in live else None
    )
    for i in range(SWEEP_MIN - 1):
        writer.want(ObjectRef("HTTPRoute", "a", f"gone-{i}"), {"parents": []})
    live.update({"kept-0", "kept-1"})
    assert writer.wanted() == SWEEP_MIN - 1
    writer.want(ObjectRef("HTTPRoute", "a", "kept-0"), {"parents": []})
    assert writer.wanted() == 1
    writer.want(ObjectRef("HTTPRoute", "a", "kept-1"), {"parents": []})
    assert writer.wanted() == 2
