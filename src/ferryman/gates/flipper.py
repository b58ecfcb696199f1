"""The leader's loop that opens readiness gates: pods/status, one condition.

Every replica runs it so that the pending-gates gauge is true everywhere; only
the leader writes. Each round reads the pending pods (from the Store, through
``pending``), every replica's report (``reports``), decides per pod
(``decide``) and patches the pods whose condition should change. A round runs
every second while gates are pending and at once when this replica's data
plane applied a change (``kick``); a pod whose write failed waits out a backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ferryman.gates.decide import (
    TIMED_OUT,
    GatedPod,
    PodKey,
    ReplicaReport,
    Verdict,
    condition_patch,
    decide,
    live_replicas,
)
from ferryman.kube import client as kube
from ferryman.kube.errors import Conflict, Invalid, KubeError, NotFound
from ferryman.kube.resources import AsyncClient, PatchType, PodStatus
from ferryman.observability.metrics import Metrics

log = logging.getLogger("ferryman.gates")

# How often pending gates are looked at again: the replicas' reports come by
# polling their Leases, so this bounds how long an applied pod waits for its gate.
ROUND = 1.0
BACKOFF_FIRST = 1.0
BACKOFF_MAX = 30.0
# A written condition reaches the Store through the Pod watch a moment later;
# meanwhile the same verdict is not written again.
ECHO_WAIT = 5.0
# Errors that mean the pod under that name is gone (404) or another
# incarnation: the API server refuses the UID in the patch as a change of an
# immutable field (422; 409 where a precondition says so): nothing to write.
GONE = (NotFound, Conflict, Invalid)


def rfc3339(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def write_condition(client: AsyncClient, key: PodKey, patch: dict[str, Any]) -> bool:
    """Patch ``key``'s status; False when that pod (that UID) no longer exists."""
    try:
        await kube.patch(
            client,
            PodStatus,
            key.name,
            patch,
            namespace=key.namespace,
            patch_type=PatchType.STRATEGIC,
        )
    except KubeError as e:
        if isinstance(e, GONE):
            log.info(
                "gate not written: pod gone or replaced",
                extra={"fields": {"pod": str(key), "code": e.status, "error": str(e)}},
            )
            return False
        raise
    return True


@dataclass(frozen=True)
class GateSettings:
    gate_type: str
    timeout: float  # seconds after creation to open anyway; 0 never


Write = Callable[[PodKey, dict[str, Any]], Awaitable[bool]]


class Flipper:
    """``write``: ``write_condition`` with its client (a fake in unit tests)."""

    def __init__(
        self,
        write: Write,
        settings: GateSettings,
        pending: Callable[[], list[GatedPod]],
        reports: Callable[[float], Awaitable[list[ReplicaReport]]],
        is_leader: Callable[[], bool],
        warn: Callable[[PodKey, str], None],
        metrics: Metrics,
    ) -> None:
        self._write = write
        self._settings = settings
        self._pending = pending
        self._reports = reports
        self._is_leader = is_leader
        self._warn = warn
        self._metrics = metrics
        self._kick = asyncio.Event()
        self._written: dict[PodKey, tuple[Verdict, float]] = {}
        self._failures: dict[PodKey, int] = {}
        self._retry_at: dict[PodKey, float] = {}

    def kick(self) -> None:
        self._kick.set()

    async def run(self) -> None:
        while True:
            self._kick.clear()
            await self.once(time.time())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kick.wait(), ROUND)

    async def once(self, now: float) -> None:
        """One round at time ``now``."""
        pods = self._pending()
        self._metrics.gates_pending.set(len(pods))
        if not self._is_leader():
            self._written.clear()  # another leader may write meanwhile
            return
        if pods:
            try:
                await self._round(pods, now)
            except Exception as e:  # replicas' reports unreadable: the next round retries
                log.warning("readiness gates not checked", extra={"fields": {"error": str(e)}})

    async def _round(self, pods: list[GatedPod], now: float) -> None:
        live = live_replicas(await self._reports(now), now)
        keys = {p.key for p in pods}
        for table in (self._written, self._failures, self._retry_at):
            for k in [k for k in table if k not in keys]:
                del table[k]
        for pod in pods:
            if self._retry_at.get(pod.key, 0.0) > now:
                continue
            await self._flip(pod, decide(pod, live, now, self._settings.timeout), now)

    async def _flip(self, pod: GatedPod, verdict: Verdict, now: float) -> None:
        last = self._written.get(pod.key)
        if last is not None and last[0] == verdict and now - last[1] < ECHO_WAIT:
            return
        patch = condition_patch(pod, self._settings.gate_type, verdict, rfc3339(now))
        if patch is None:
            return
        try:
            written = await self._write(pod.key, patch)
        except Exception as e:
            failures = self._failures.get(pod.key, 0) + 1
            self._failures[pod.key] = failures
            self._retry_at[pod.key] = now + min(BACKOFF_FIRST * 2 ** (failures - 1), BACKOFF_MAX)
            self._metrics.gate_flips.labels(result="error").inc()
            log.warning(
                "readiness gate not written",
                extra={"fields": {"pod": str(pod.key), "error": str(e)}},
            )
            return
        self._failures.pop(pod.key, None)
        if not written:
            # Gone or replaced: the Pod watch brings what is there now.
            self._retry_at[pod.key] = now + BACKOFF_FIRST
            return
        self._written[pod.key] = (verdict, now)
        if verdict.open:
            self._metrics.gate_flips.labels(result=_result(verdict.reason)).inc()
            self._metrics.gate_seconds.observe(max(now - pod.created, 0.0))
            if verdict.reason == TIMED_OUT:
                self._warn(pod.key, verdict.message)
        log.info(
            "readiness gate written",
            extra={
                "fields": {
                    "pod": str(pod.key),
                    "status": verdict.status,
                    "reason": verdict.reason,
                    "message": verdict.message,
                }
            },
        )


def _result(reason: str) -> str:
    """A reason as a metric label: ``NotServed`` -> ``not_served``."""
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in reason).lstrip("_")
