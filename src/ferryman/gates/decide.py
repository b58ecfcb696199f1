"""What a pod's readiness-gate condition should say: pure, no I/O, no clock.

The leader decides for every pod whose gate is pending, from what each replica
reports it has applied (``ReplicaReport``) and the time it is given. A replica
counts while its report is fresh (renewed within its duration): a replica that
died stops holding gates back once its report expires, and a report left by a
dead one never lets a gate through on its own. A report renewed in the future
(beyond ``CLOCK_SKEW``) does not count: anyone who can write a Lease in that
namespace could otherwise hold every gate closed with one Lease renewed in ten
years (the gate timeout defaults to never).

The gate opens (True) when any of these holds, in this order of reasons:

- ``NotServed``: no Service that ferryman serves selects the pod; ferryman must
  never strand a pod NotReady for a route it does not have.
- ``Applied``: every live replica's data plane has applied an endpoint set that
  holds the pod.
- ``TimedOut``: ``--readiness-gate-timeout`` has passed since the pod was created
  (fail open; a Warning Event says so).

Otherwise it stays False with reason ``WaitingForReplicas`` and a message naming
how many replicas have applied it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from ferryman.kube.lease_clock import CLOCK_SKEW as CLOCK_SKEW
from ferryman.kube.lease_clock import alive

APPLIED = "Applied"
NOT_SERVED = "NotServed"
TIMED_OUT = "TimedOut"
WAITING = "WaitingForReplicas"


class PodKey(NamedTuple):
    """A pod as one incarnation: a pod recreated under its name is another key."""

    namespace: str
    name: str
    uid: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}/{self.uid}"


@dataclass(frozen=True)
class Condition:
    """A pod condition as the API holds it (the fields ferryman writes)."""

    status: str  # "True", "False" or "Unknown"
    reason: str = ""
    message: str = ""
    last_transition: str = ""  # RFC 3339, as the API wrote it


@dataclass(frozen=True)
class GatedPod:
    key: PodKey
    created: float  # seconds since the epoch
    served: bool  # a Service ferryman serves selects it
    condition: Condition | None  # ferryman's gate condition, None while unset


@dataclass(frozen=True)
class ReplicaReport:
    identity: str
    renewed: float  # seconds since the epoch
    duration: float  # seconds the report holds without a renewal
    applied: frozenset[PodKey]

    def live(self, now: float) -> bool:
        return alive(self.renewed, self.duration, now)


@dataclass(frozen=True)
class Verdict:
    open: bool
    reason: str
    message: str

    @property
    def status(self) -> str:
        return "True" if self.open else "False"


def live_replicas(reports: Iterable[ReplicaReport], now: float) -> list[ReplicaReport]:
    """The fresh reports, one per replica (the latest when one reports twice)."""
    latest: dict[str, ReplicaReport] = {}
    for r in reports:
        if r.live(now) and (r.identity not in latest or latest[r.identity].renewed < r.renewed):
            latest[r.identity] = r
    return sorted(latest.values(), key=lambda r: r.identity)


def decide(pod: GatedPod, live: list[ReplicaReport], now: float, timeout: float) -> Verdict:
    """The gate condition ``pod`` should have. ``live``: ``live_replicas``'s answer;
    ``timeout``: seconds after creation to fail open, 0 never."""
    if not pod.served:
        return Verdict(True, NOT_SERVED, "no Service served by ferryman selects the pod")
    applied = [r.identity for r in live if pod.key in r.applied]
    if live and len(applied) == len(live):
        return Verdict(True, APPLIED, f"applied by all {len(live)} live ferryman replicas")
    waiting = sorted(r.identity for r in live if pod.key not in r.applied)
    if timeout > 0 and now - pod.created >= timeout:
        return Verdict(
            True,
            TIMED_OUT,
            f"not applied by every ferryman replica within {timeout:g}s "
            f"(waiting for: {', '.join(waiting) or 'a live replica'}); opened anyway",
        )
    return Verdict(
        False,
        WAITING,
        f"applied by {len(applied)} of {len(live)} live ferryman replicas"
        + (f" (waiting for: {', '.join(waiting)})" if waiting else ""),
    )


def condition_patch(
    pod: GatedPod, gate_type: str, verdict: Verdict, now_rfc3339: str
) -> dict[str, Any] | None:
    """The pods/status strategic-merge patch that sets the gate condition, or
    None when the pod already shows ``verdict`` (no write).

    Conditions merge by ``type``, so the patch touches only ferryman's; the
    pod's UID in the body is a precondition: the API server refuses the patch
    when the pod under that name is another incarnation. ``lastTransitionTime``
    moves only when the status does.
    """
    have = pod.condition
    if (
        have is not None
        and have.status == verdict.status
        and (have.reason, have.message) == (verdict.reason, verdict.message)
    ):
        return None
    since = now_rfc3339
    if have is not None and have.status == verdict.status and have.last_transition:
        since = have.last_transition
    condition = {
        "type": gate_type,
        "status": verdict.status,
        "reason": verdict.reason,
        "message": verdict.message,
        "lastTransitionTime": since,
    }
    return {"metadata": {"uid": pod.key.uid}, "status": {"conditions": [condition]}}
