"""Each replica's report Lease: the mechanics gates and drains publish in.

Every replica, leader or not, keeps a coordination.k8s.io/v1 Lease of its own
in the leader-election namespace: ``holderIdentity`` is the replica,
``renewTime`` says it is alive, and its annotations carry what each feature
reports (readiness gates' applied pods, ``gates/report.py``; machine drains'
state, ``drains/replica.py``). The leader lists these Leases by their class
label to read every report in one call.

A Lease rather than asking each replica: no replica needs to reach another
over the network (no new port, no NetworkPolicy hole), a replica that dies
stops counting once its Lease expires, and the leader reads every report with
one list call.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from lightkube import AsyncClient
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease

from ferryman.kube import client as kube
from ferryman.kube.errors import NotFound
from ferryman.kube.lease_clock import alive

log = logging.getLogger("ferryman.gates")

CLASS_LABEL = "gates.ferryman.io/ingress-class"

# Report Leases' names start so, and hold their replica's identity last: the
# leader lock (or any other Lease someone labels) is never read as a report.
REPORT_PREFIX = "ferryman-report."


def lease_name(lock_name: str, identity: str) -> str:
    """One Lease per replica and installation (the leader lock names the installation)."""
    return f"{REPORT_PREFIX}{lock_name}.{identity}"


@dataclass(frozen=True)
class ReportLease:
    """What one replica's report Lease says."""

    identity: str
    renewed: float  # seconds since the epoch
    duration: float  # seconds the report holds without a renewal
    annotations: Mapping[str, str]

    def live(self, now: float) -> bool:
        return alive(self.renewed, self.duration, now)


def live_identities(leases: Iterable[ReportLease], now: float) -> frozenset[str]:
    """The replicas with a fresh report."""
    return frozenset(lease.identity for lease in leases if lease.live(now))


def report_lease_of(lease: Lease, longest: float = math.inf) -> ReportLease | None:
    """``longest``: the installation's lease duration; a report claiming to last
    longer (a forged one, lasting years) counts for that long only."""
    spec = lease.spec or LeaseSpec()
    renewed = spec.renewTime or spec.acquireTime
    if not spec.holderIdentity or renewed is None or not spec.leaseDurationSeconds:
        return None  # released, or never renewed: not a live replica
    name = (lease.metadata.name if lease.metadata else None) or ""
    if not (name.startswith(REPORT_PREFIX) and name.endswith(f".{spec.holderIdentity}")):
        return None
    annotations = (lease.metadata.annotations if lease.metadata else None) or {}
    return ReportLease(
        spec.holderIdentity,
        renewed.timestamp(),
        min(float(spec.leaseDurationSeconds), longest),
        annotations,
    )


async def read_leases(
    client: AsyncClient, namespace: str, ingress_class: str, longest: float = math.inf
) -> list[ReportLease]:
    """Every replica's report Lease, with its annotations (what each feature publishes)."""
    found: list[ReportLease] = []
    async for lease in kube.items(client, Lease, namespace=namespace,
                                  labels={CLASS_LABEL: ingress_class}):  # fmt: skip
        if (report := report_lease_of(lease, longest)) is not None:
            found.append(report)
    return found


class ReplicaLease:
    """Publishes this replica's report: at once when it changes (``changed``),
    and every ``renew_every`` seconds so it stays alive."""

    def __init__(
        self,
        client: AsyncClient,
        namespace: str,
        name: str,
        identity: str,
        ingress_class: str,
        annotations: Callable[[], Mapping[str, str]],
        duration: float,
    ) -> None:
        """``annotations``: what the report says, asked each time it is published."""
        self._client = client
        self._namespace = namespace
        self._name = name
        self._identity = identity
        self._class = ingress_class
        self._annotations = annotations
        self._duration = max(1, round(duration))
        # A third of the duration: two renewals may fail before the report expires.
        self._renew_every = self._duration / 3
        self._changed = asyncio.Event()

    @property
    def duration(self) -> float:
        """Seconds each report lasts: every replica of the installation publishes the same."""
        return float(self._duration)

    def changed(self) -> None:
        self._changed.set()

    async def run(self) -> None:
        try:
            while True:
                self._changed.clear()
                try:
                    await self._publish()
                except Exception as e:  # API down: the next round retries
                    log.warning("replica report failed", extra={"fields": {"error": str(e)}})
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), self._renew_every)
        finally:
            # Stopping: no longer a replica whose data plane gates wait for.
            with contextlib.suppress(Exception):
                await asyncio.shield(self._withdraw())

    async def _publish(self) -> None:
        now = datetime.datetime.now(datetime.UTC)
        body = {
            "metadata": {
                "labels": {CLASS_LABEL: self._class},
                "annotations": dict(self._annotations()),
            },
            "spec": {
                "holderIdentity": self._identity,
                "leaseDurationSeconds": self._duration,
                "renewTime": now.isoformat(timespec="microseconds").replace("+00:00", "Z"),
            },
        }
        try:
            # Only this replica writes its Lease: a merge patch has no conflict to lose.
            await kube.patch(self._client, Lease, self._name, body, namespace=self._namespace)
        except NotFound:
            await kube.create(
                self._client,
                Lease(
                    metadata=ObjectMeta(
                        name=self._name,
                        namespace=self._namespace,
                        labels={CLASS_LABEL: self._class},
                        annotations=dict(self._annotations()),
                    ),
                    spec=LeaseSpec(
                        holderIdentity=self._identity,
                        leaseDurationSeconds=self._duration,
                        acquireTime=now,
                        renewTime=now,
                    ),
                ),
            )

    async def _withdraw(self) -> None:
        await kube.delete(self._client, Lease, self._name, namespace=self._namespace)
