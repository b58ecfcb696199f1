"""One replica's part in readiness gates: its Lease report, and the flipper that
writes when this replica leads. ``kubernetes_mode`` builds it once the controller
exists and hands it the controller's answers as callables (this package sits
below it), and the replica's Lease, which it runs (machine drains share it)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ferryman.engine.settings import Settings
from ferryman.gates.decide import GatedPod, PodKey, ReplicaReport
from ferryman.gates.flipper import Flipper, GateSettings, write_condition
from ferryman.gates.report import ReplicaLease, read_reports
from ferryman.kube.resources import AsyncClient
from ferryman.observability.metrics import Metrics
from ferryman.resources.readiness_gate import gate_type


class GateKeeper:
    def __init__(
        self,
        client: AsyncClient,
        settings: Settings,
        identity: str,
        lease: ReplicaLease,
        pending: Callable[[], list[GatedPod]],
        is_leader: Callable[[], bool],
        warn: Callable[[PodKey, str], None],
        metrics: Metrics,
    ) -> None:
        self._client = client
        self._namespace = settings.leader_election.lock_namespace
        self._class = settings.ingress_class
        self._identity = identity
        self.lease = lease
        self.flipper = Flipper(
            lambda key, patch: write_condition(client, key, patch),
            GateSettings(gate_type(self._class), settings.gates.timeout),
            pending,
            self._reports,
            is_leader,
            warn,
            metrics,
        )

    def applied_changed(self) -> None:
        """This replica's data plane applied another set of gated pods."""
        self.lease.changed()
        self.flipper.kick()

    async def _reports(self, now: float) -> list[ReplicaReport]:
        """Every replica's report, this one's as it is now (not as last published)."""
        others = await read_reports(self._client, self._namespace, self._class, self.lease.duration)
        return [*(r for r in others if r.identity != self._identity), self.lease.current(now)]

    def tasks(self) -> list[asyncio.Task[Any]]:
        return [asyncio.create_task(self.flipper.run(), name="gate-flipper")]
