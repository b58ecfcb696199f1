"""Leader election on a coordination.k8s.io/v1 Lease (client-go's algorithm).

Every replica serves traffic; only the leader writes status and Events. A
replica holds the lease while it renews it within ``renew_deadline``; another
takes it over once ``lease_duration`` has passed without a renewal. A replica
that stops releases the lease so a successor need not wait. The defaults are
NIC's: a 30 s lease, a 15 s renew deadline, a try every 7.5 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from collections.abc import Callable

from lightkube import AsyncClient
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease

from ferryman.kube import client as kube
from ferryman.kube.errors import Conflict, NotFound

log = logging.getLogger("ferryman.leader")


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class LeaderElector:
    def __init__(
        self,
        client: AsyncClient,
        namespace: str,
        name: str,
        identity: str,
        on_change: Callable[[bool], None],
        lease_duration: float = 30.0,
        renew_deadline: float = 15.0,
        retry_period: float = 7.5,
    ) -> None:
        self._client = client
        self._namespace = namespace
        self._name = name
        self._identity = identity
        self._on_change = on_change
        self._lease_duration = lease_duration
        self._renew_deadline = renew_deadline
        self._retry_period = retry_period
        self.leader = False
        self._last_renew = 0.0

    def _set(self, leader: bool) -> None:
        if leader != self.leader:
            self.leader = leader
            log.info(
                "leadership changed",
                extra={"fields": {"leader": leader, "identity": self._identity}},
            )
            self._on_change(leader)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                try:
                    held = await self._acquire_or_renew()
                except Exception as e:  # API down or unreachable: keep trying
                    log.warning("lease update failed", extra={"fields": {"error": str(e)}})
                    held = self.leader and loop.time() - self._last_renew < self._renew_deadline
                else:
                    if held:
                        self._last_renew = loop.time()
                self._set(held)
                # A leader renews well inside its deadline; a follower polls.
                await asyncio.sleep(self._retry_period if not held else self._retry_period / 2)
        finally:
            if self.leader:
                self._set(False)
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._release())

    async def _acquire_or_renew(self) -> bool:
        now = _now()
        try:
            lease = await kube.get(self._client, Lease, self._name, namespace=self._namespace)
        except NotFound:
            await kube.create(
                self._client,
                Lease(
                    metadata=ObjectMeta(name=self._name, namespace=self._namespace),
                    spec=self._spec(now, now, 0),
                ),
            )
            return True
        spec = lease.spec or LeaseSpec()
        holder = spec.holderIdentity or ""
        if holder != self._identity:
            renewed = spec.renewTime or spec.acquireTime
            duration = spec.leaseDurationSeconds or 0
            if holder and renewed and renewed + datetime.timedelta(seconds=duration) > now:
                return False
            lease.spec = self._spec(now, now, (spec.leaseTransitions or 0) + 1)
        else:
            lease.spec = self._spec(spec.acquireTime or now, now, spec.leaseTransitions or 0)
        try:
            await kube.replace(self._client, lease)  # carries resourceVersion: races lose
        except Conflict:
            return False
        return True

    def _spec(
        self, acquired: datetime.datetime, renewed: datetime.datetime, transitions: int
    ) -> LeaseSpec:
        return LeaseSpec(
            holderIdentity=self._identity,
            leaseDurationSeconds=max(1, round(self._lease_duration)),
            acquireTime=acquired,
            renewTime=renewed,
            leaseTransitions=transitions,
        )

    async def _release(self) -> None:
        lease = await kube.get(self._client, Lease, self._name, namespace=self._namespace)
        if lease.spec and lease.spec.holderIdentity == self._identity:
            lease.spec.holderIdentity = None
            lease.spec.leaseDurationSeconds = 1
            lease.spec.renewTime = _now()
            await kube.replace(self._client, lease)
