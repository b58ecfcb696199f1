"""ferryman.gates.decide: when a pod's readiness gate opens, and the patch that says so."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ferryman.gates.decide import (
    APPLIED,
    CLOCK_SKEW,
    NOT_SERVED,
    TIMED_OUT,
    WAITING,
    Condition,
    GatedPod,
    PodKey,
    ReplicaReport,
    Verdict,
    condition_patch,
    decide,
    live_replicas,
)

POD = PodKey("ns", "web-1", "uid-1")
OTHER = PodKey("ns", "web-1", "uid-0")  # the same name, an earlier incarnation
GATE = "target-health.ferryman.io/ferryman"
NOW = 1000.0

reports = st.lists(
    st.builds(
        ReplicaReport,
        identity=st.sampled_from(["a", "b", "c", "d"]),
        renewed=st.floats(NOW - 60, NOW),
        duration=st.sampled_from([5.0, 15.0, 30.0]),
        applied=st.frozensets(st.sampled_from([POD, OTHER])),
    ),
    max_size=6,
)


def pod(
    served: bool = True, created: float = NOW - 1, condition: Condition | None = None
) -> GatedPod:
    return GatedPod(POD, created, served, condition)


@given(reports, st.booleans(), st.floats(0, 120), st.sampled_from([0.0, 10.0, 60.0]))
def test_the_gate_opens_iff_every_live_replica_applied_or_not_served_or_timed_out(
    given_reports: list[ReplicaReport], served: bool, age: float, timeout: float
) -> None:
    live = live_replicas(given_reports, NOW)
    verdict = decide(pod(served, NOW - age), live, NOW, timeout)
    everyone = bool(live) and all(POD in r.applied for r in live)
    timed_out = timeout > 0 and age >= timeout
    assert verdict.open == (not served or everyone or timed_out)
    expected = (
        NOT_SERVED if not served else APPLIED if everyone else TIMED_OUT if timed_out else WAITING
    )
    assert verdict.reason == expected


@given(reports)
def test_an_expired_report_never_counts(given_reports: list[ReplicaReport]) -> None:
    live = live_replicas(given_reports, NOW)
    assert all(r.renewed + r.duration > NOW for r in live)
    assert len({r.identity for r in live}) == len(live)
    assert {r.identity for r in live} == {
        r.identity for r in given_reports if r.renewed + r.duration > NOW
    }


def test_a_dead_replicas_report_does_not_open_the_gate() -> None:
    dead = ReplicaReport("b", NOW - 31, 30, frozenset({POD}))
    alive = ReplicaReport("a", NOW - 1, 30, frozenset())
    verdict = decide(pod(), live_replicas([dead, alive], NOW), NOW, 0)
    message = "applied by 0 of 1 live ferryman replicas (waiting for: a)"
    assert verdict == Verdict(False, WAITING, message)


def test_a_dead_replica_no_longer_holds_the_gate_back() -> None:
    dead = ReplicaReport("b", NOW - 31, 30, frozenset())
    alive = ReplicaReport("a", NOW - 1, 30, frozenset({POD}))
    assert decide(pod(), live_replicas([dead, alive], NOW), NOW, 0).reason == APPLIED


def test_the_message_counts_the_replicas_that_applied() -> None:
    live = [
        ReplicaReport("a", NOW, 30, frozenset({POD})),
        ReplicaReport("b", NOW, 30, frozenset({OTHER})),
    ]
    verdict = decide(pod(), live, NOW, 0)
    assert verdict.message == "applied by 1 of 2 live ferryman replicas (waiting for: b)"


def test_another_incarnations_report_does_not_count() -> None:
    live = [ReplicaReport("a", NOW, 30, frozenset({OTHER}))]
    assert not decide(pod(), live, NOW, 0).open


def test_no_live_replica_keeps_the_gate_closed_until_the_timeout() -> None:
    assert not decide(pod(created=NOW - 5), [], NOW, 10).open
    assert decide(pod(created=NOW - 10), [], NOW, 10).reason == TIMED_OUT


def test_the_patch_carries_the_uid_and_only_ferrymans_condition() -> None:
    verdict = Verdict(True, APPLIED, "applied by all 2 live ferryman replicas")
    patch = condition_patch(pod(), GATE, verdict, "2026-01-01T00:00:00Z")
    assert patch == {
        "metadata": {"uid": "uid-1"},
        "status": {
            "conditions": [
                {
                    "type": GATE,
                    "status": "True",
                    "reason": APPLIED,
                    "message": "applied by all 2 live ferryman replicas",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ]
        },
    }


def test_an_unchanged_condition_is_not_written() -> None:
    have = Condition("False", WAITING, "applied by 1 of 2 live ferryman replicas", "T0")
    verdict = Verdict(False, WAITING, "applied by 1 of 2 live ferryman replicas")
    assert condition_patch(pod(condition=have), GATE, verdict, "T1") is None


def test_the_transition_time_moves_only_with_the_status() -> None:
    have = Condition("False", WAITING, "applied by 0 of 2 live ferryman replicas", "T0")
    same = Verdict(False, WAITING, "applied by 1 of 2 live ferryman replicas")
    patch = condition_patch(pod(condition=have), GATE, same, "T1")
    assert patch is not None
    assert patch["status"]["conditions"][0]["lastTransitionTime"] == "T0"
    flipped = Verdict(True, APPLIED, "applied by all 2 live ferryman replicas")
    patch = condition_patch(pod(condition=have), GATE, flipped, "T1")
    assert patch is not None
    assert patch["status"]["conditions"][0]["lastTransitionTime"] == "T1"


def test_a_report_renewed_in_the_future_does_not_hold_the_gate_closed() -> None:
    """Anyone who can write a Lease there could forge a report renewed in ten years;
    the gate timeout defaults to never, so it held every gate closed."""
    alive = ReplicaReport("a", NOW - 1, 30, frozenset({POD}))
    for identity in ("forged", "a"):
        forged = ReplicaReport(identity, NOW + 10 * 365 * 86400, 30, frozenset())
        assert decide(pod(), live_replicas([alive, forged], NOW), NOW, 0).reason == APPLIED


@given(st.floats(0, 60), st.sampled_from([5.0, 30.0]))
def test_a_report_ahead_by_at_most_the_clock_skew_counts(ahead: float, duration: float) -> None:
    report = ReplicaReport("a", NOW + ahead, duration, frozenset())
    assert bool(live_replicas([report], NOW)) == (ahead <= CLOCK_SKEW)
