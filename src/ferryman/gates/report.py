"""Each replica's report of the gated pods its data plane has applied: a Lease.

(Machine lifecycle hooks publish their drain state in the same Lease: ``extra``.)

Every replica, leader or not, keeps a coordination.k8s.io/v1 Lease of its own
in the leader-election namespace: ``holderIdentity`` is the replica,
``renewTime`` says it is alive, and an annotation lists the pods with a pending
ferryman gate whose address sits in an endpoint set its NGINX has confirmed
(``Controller.applied_gated_pods``). Only pending pods are listed, so the
annotation stays small however many pods the cluster runs. The leader lists
these Leases by their class label to decide (``decide.live_replicas``).

A Lease rather than asking each replica: no replica needs to reach another
over the network (no new port, no NetworkPolicy hole), a replica that dies
stops counting once its Lease expires, and the leader reads every report with
one list call.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import logging
import math
from collections.abc import Callable, Iterable, Mapping

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease
from lightkube.types import PatchType

from ferryman.gates.decide import PodKey, ReplicaReport

log = logging.getLogger("ferryman.gates")

CLASS_LABEL = "gates.ferryman.io/ingress-class"
APPLIED_ANNOTATION = "gates.ferryman.io/applied-pods"


# Report Leases' names start so, and hold their replica's identity last: the
# leader lock (or any other Lease someone labels) is never read as a report.
REPORT_PREFIX = "ferryman-report."


def lease_name(lock_name: str, identity: str) -> str:
    """One Lease per replica and installation (the leader lock names the installation)."""
    return f"{REPORT_PREFIX}{lock_name}.{identity}"


# The API server refuses an object whose annotations exceed 256 KiB in all. A
# report that no longer fits would stop renewing the Lease, and the replica
# would count as dead (its gates then open without it); so the list is cut
# short instead: the pods left out wait for a later report, as more gates open.
# A pod takes some 100 bytes (namespace, name, UID): about 2,000 pending pods fit.
MAX_REPORT = 200_000


def encode(applied: Iterable[tuple[str, str, str]], limit: int = MAX_REPORT) -> str:
    """The annotation's text: as many pods (in name order) as fit in ``limit``."""
    kept: list[str] = []
    size = 2  # the brackets
    for name in sorted("/".join(k) for k in applied):
        size += len(json.dumps(name)) + 1
        if size > limit:
            break
        kept.append(name)
    return json.dumps(kept, separators=(",", ":"))


def decode(text: str | None) -> frozenset[PodKey]:
    """The annotation's pods; anything malformed counts as not applied."""
    try:
        items = json.loads(text or "[]")
    except ValueError:
        return frozenset()
    keys = set()
    for item in items if isinstance(items, list) else []:
        parts = item.split("/") if isinstance(item, str) else []
        if len(parts) == 3 and all(parts):
            keys.add(PodKey(*parts))
    return frozenset(keys)


def report_of(lease: Lease, longest: float = math.inf) -> ReplicaReport | None:
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
    return ReplicaReport(
        spec.holderIdentity,
        renewed.timestamp(),
        min(float(spec.leaseDurationSeconds), longest),
        decode(annotations.get(APPLIED_ANNOTATION)),
    )


async def read_leases(
    client: AsyncClient, namespace: str, ingress_class: str, longest: float = math.inf
) -> list[tuple[ReplicaReport, Mapping[str, str]]]:
    """Every replica's report, with its Lease's annotations (what other features
    publish there: ``ReplicaLease``'s ``extra``)."""
    found: list[tuple[ReplicaReport, Mapping[str, str]]] = []
    async for lease in client.list(Lease, namespace=namespace, labels={CLASS_LABEL: ingress_class}):
        if (report := report_of(lease, longest)) is not None:
            annotations = (lease.metadata.annotations if lease.metadata else None) or {}
            found.append((report, annotations))
    return found


async def read_reports(
    client: AsyncClient, namespace: str, ingress_class: str, longest: float = math.inf
) -> list[ReplicaReport]:
    leases = await read_leases(client, namespace, ingress_class, longest)
    return [report for report, _ in leases]


class ReplicaLease:
    """Publishes this replica's report: at once when what it applied changes
    (``changed``), and every ``renew_every`` seconds so it stays alive."""

    def __init__(
        self,
        client: AsyncClient,
        namespace: str,
        name: str,
        identity: str,
        ingress_class: str,
        applied: Callable[[], Iterable[tuple[str, str, str]]],
        duration: float,
        extra: Callable[[], Mapping[str, str]] | None = None,
    ) -> None:
        """``extra``: more annotations to publish (machine lifecycle hooks' drain state)."""
        self._client = client
        self._extra = extra or dict
        self._namespace = namespace
        self._name = name
        self._identity = identity
        self._class = ingress_class
        self._applied = applied
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

    def current(self, now: float) -> ReplicaReport:
        """This replica's report as it is now (the leader counts its own without
        waiting for the API round trip)."""
        applied = frozenset(PodKey(*k) for k in self._applied())
        return ReplicaReport(self._identity, now, self._duration, applied)

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
                "annotations": self._annotations(),
            },
            "spec": {
                "holderIdentity": self._identity,
                "leaseDurationSeconds": self._duration,
                "renewTime": now.isoformat(timespec="microseconds").replace("+00:00", "Z"),
            },
        }
        try:
            # Only this replica writes its Lease: a merge patch has no conflict to lose.
            await self._client.patch(
                Lease, self._name, body, namespace=self._namespace, patch_type=PatchType.MERGE
            )
        except ApiError as e:
            if e.status.code != 404:
                raise
            await self._client.create(
                Lease(
                    metadata=ObjectMeta(
                        name=self._name,
                        namespace=self._namespace,
                        labels={CLASS_LABEL: self._class},
                        annotations=self._annotations(),
                    ),
                    spec=LeaseSpec(
                        holderIdentity=self._identity,
                        leaseDurationSeconds=self._duration,
                        acquireTime=now,
                        renewTime=now,
                    ),
                )
            )

    def _annotations(self) -> dict[str, str]:
        return {APPLIED_ANNOTATION: encode(self._applied()), **self._extra()}

    async def _withdraw(self) -> None:
        await self._client.delete(Lease, self._name, namespace=self._namespace)
