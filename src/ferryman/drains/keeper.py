"""The leader's part in Machine drains: it writes ferryman's hooks and the Events.

Each round reads every replica's report (their Leases, this replica's own as it
is now), the Machines the agent watches, and the Nodes that served endpoints run
on; ``decide`` says what each Machine needs. Hook writes are JSON merge patches
carrying the Machine's resourceVersion: the hooks of a point are one list that
other owners write too, so a write against an older version is refused (409)
and the next round reads again rather than losing another owner's change.
Rounds run whenever a Machine changes, every ``ROUND_EVERY`` seconds while one
is being deleted, and every ``IDLE_EVERY`` seconds otherwise (a Node that
gained endpoints or a replica gets its hook).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable
from typing import Any

from ferryman.drains.decide import (
    DRAINING,
    DrainReport,
    MachineView,
    Step,
    drain,
    keep,
    our_hook,
    waiting_on,
)
from ferryman.drains.replica import STATE_ANNOTATION, DrainAgent, decode
from ferryman.engine.settings import CONTROLLER_NAME
from ferryman.kube import client as kube
from ferryman.kube.errors import Conflict, KubeError, NotFound
from ferryman.kube.leases import live_identities, read_leases
from ferryman.kube.resources import AsyncClient, Pod
from ferryman.machines.events import EventWriter
from ferryman.observability.metrics import Metrics

log = logging.getLogger("ferryman.drains")

ROUND_EVERY = 1.0
IDLE_EVERY = 10.0
REPORTING_CONTROLLER = CONTROLLER_NAME


class HookKeeper:
    def __init__(
        self,
        client: AsyncClient,
        agent: DrainAgent,
        identity: str,
        lease_namespace: str,
        ingress_class: str,
        nodes_in_use: Callable[[], frozenset[str]],
        is_leader: Callable[[], bool],
        timeout: float,
        metrics: Metrics,
        lease_duration: float = math.inf,
        in_flight_timeout: float = 0.0,
    ) -> None:
        """``lease_duration``: the installation's report duration (a report
        claiming more counts that long only); ``in_flight_timeout``:
        --drain-in-flight-timeout."""
        self._in_flight_timeout = in_flight_timeout
        self._client = client
        self._lease_duration = lease_duration
        self._agent = agent
        self._identity = identity
        self._namespace = lease_namespace
        self._class = ingress_class
        self._nodes_in_use = nodes_in_use
        self._is_leader = is_leader
        self._timeout = timeout
        self._metrics = metrics
        self._events = EventWriter(client, identity, REPORTING_CONTROLLER)
        self._announced: set[str] = set()  # Machine uids told IngressTrafficDraining
        self._terminate_since: dict[str, float] = {}
        self._quiet_since: dict[str, float] = {}  # Machine uid -> drained-looking since

    async def run(self) -> None:
        await self._agent.synced.wait()
        while True:
            self._agent.machines_changed.clear()
            # A follower looks every ROUND_EVERY too (it costs no API call), so a
            # replica that becomes leader mid-drain takes over within a second.
            busy = True
            if self._is_leader():
                try:
                    busy = await self.round(time.time())
                except Exception as e:  # the API down: the next round tries again
                    log.warning("machine hooks round failed", extra={"fields": {"error": str(e)}})
                    busy = True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._agent.machines_changed.wait(), ROUND_EVERY if busy else IDLE_EVERY
                )

    async def reports(self, now: float) -> list[DrainReport]:
        """Every live replica's drain report; this one's as it is now. A replica
        that publishes none (an older version) holds drains until the timeout."""
        leases = await read_leases(self._client, self._namespace, self._class, self._lease_duration)
        live = live_identities(leases, now)
        found: dict[str, DrainReport] = {}
        for lease in leases:
            if lease.identity in live and lease.identity != self._identity:
                found[lease.identity] = decode(
                    lease.identity, lease.annotations.get(STATE_ANNOTATION)
                ) or DrainReport(lease.identity, "", True)
        found[self._identity] = self._agent.report()
        return [await self._as_seen(r) for _, r in sorted(found.items())]

    async def _as_seen(self, report: DrainReport) -> DrainReport:
        """A replica that says it fails readiness counts as out of rotation only
        once its pod shows NotReady in the API (what Services and the load
        balancer follow); one that is not a pod of this namespace, on its word."""
        if report.ready:
            return report
        try:
            pod = await kube.get(self._client, Pod, report.identity, namespace=self._namespace)
        except NotFound:
            return report
        conditions = (pod.status.conditions if pod.status else None) or []
        ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
        if not ready:
            return report
        return DrainReport(
            report.identity,
            report.node,
            True,
            report.applied,
            report.in_flight,
            report.replica_in_flight,
        )

    async def round(self, now: float) -> bool:
        """One look at every Machine; True while some Machine is being deleted."""
        flavour = self._agent.flavour
        hook = our_hook(flavour)
        live = await self.reports(now)
        replica_nodes = frozenset(r.node for r in live if r.node)
        in_use = self._nodes_in_use()
        busy = False
        draining = 0
        for machine in list(self._agent.machines.values()):
            if machine.deleting_since is None:
                self._forget(machine.uid)
                step = keep(machine, flavour, in_use, replica_nodes)
            else:
                busy = True
                holds_drain = hook in machine.hooks.pre_drain
                draining += holds_drain
                if not holds_drain and hook in machine.hooks.pre_terminate:
                    self._terminate_since.setdefault(machine.uid, now)
                if waiting_on(machine.node, live):
                    self._quiet_since.pop(machine.uid, None)
                else:
                    self._quiet_since.setdefault(machine.uid, now)
                step = drain(
                    machine,
                    flavour,
                    live,
                    now,
                    self._timeout,
                    machine.uid in self._announced,
                    self._terminate_since.get(machine.uid),
                    self._quiet_since.get(machine.uid),
                    self._in_flight_timeout,
                )
            await self._apply(machine, step, now)
        self._metrics.machines_draining.set(draining)
        uids = {m.uid for m in self._agent.machines.values()}
        for uid in (
            self._announced | self._terminate_since.keys() | self._quiet_since.keys()
        ) - uids:
            self._forget(uid)
        return busy

    async def _apply(self, machine: MachineView, step: Step, now: float) -> None:
        patch = step.patch_for(machine.raw)
        if patch is not None:
            patch.setdefault("metadata", {})["resourceVersion"] = (
                machine.raw.get("metadata") or {}
            ).get("resourceVersion")
            if not await self._write(machine, patch, step):
                return
        if step.notice is not None:
            n = step.notice
            await self._events.emit(machine.raw, n.reason, n.message, "Drain", n.type)
            if n.reason == DRAINING:
                self._announced.add(machine.uid)
        if step.result:
            self._metrics.machine_drains.labels(result=step.result).inc()
            if machine.deleting_since is not None:
                self._metrics.machine_drain_seconds.observe(now - machine.deleting_since)

    async def _write(self, machine: MachineView, patch: dict[str, Any], step: Step) -> bool:
        try:
            await kube.patch(
                self._client, self._agent.resource, machine.name, patch, namespace=machine.namespace
            )
        except KubeError as e:
            conflict = isinstance(e, Conflict)
            self._metrics.machine_hook_writes.labels(
                result="conflict" if conflict else "error"
            ).inc()
            if not conflict:
                log.warning(
                    "machine hook write failed",
                    extra={"fields": {"machine": machine.name, "error": str(e)}},
                )
            return False
        for p in step.patches:
            self._metrics.machine_hook_writes.labels(
                result="added" if p.present else "removed"
            ).inc()
        log.info(
            "machine hooks written",
            extra={
                "fields": {
                    "machine": f"{machine.namespace}/{machine.name}",
                    "hooks": [f"{p.point}{'+' if p.present else '-'}" for p in step.patches],
                }
            },
        )
        return True

    def _forget(self, uid: str) -> None:
        self._announced.discard(uid)
        self._terminate_since.pop(uid, None)
        self._quiet_since.pop(uid, None)
