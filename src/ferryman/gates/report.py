"""Readiness gates' part of each replica's report Lease (``kube/leases.py``):
an annotation listing the pods with a pending ferryman gate whose address sits
in an endpoint set its NGINX has confirmed (``Controller.applied_gated_pods``).

(Machine lifecycle hooks publish their drain state in the same Lease: ``extra``.)

Only pending pods are listed, so the annotation stays small however many pods
the cluster runs. The leader lists the Leases by their class label to decide
(``decide.live_replicas``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping

from ferryman.gates.decide import PodKey, ReplicaReport
from ferryman.kube.leases import CLASS_LABEL as CLASS_LABEL
from ferryman.kube.leases import REPORT_PREFIX as REPORT_PREFIX
from ferryman.kube.leases import ReplicaLease as _ReportPublisher
from ferryman.kube.leases import ReportLease, read_leases, report_lease_of
from ferryman.kube.leases import lease_name as lease_name
from ferryman.kube.resources import AsyncClient, Lease

APPLIED_ANNOTATION = "gates.ferryman.io/applied-pods"

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


def _report(lease: ReportLease) -> ReplicaReport:
    return ReplicaReport(
        lease.identity,
        lease.renewed,
        lease.duration,
        decode(lease.annotations.get(APPLIED_ANNOTATION)),
    )


def report_of(lease: Lease, longest: float = math.inf) -> ReplicaReport | None:
    """``longest``: the installation's lease duration; a report claiming to last
    longer (a forged one, lasting years) counts for that long only."""
    found = report_lease_of(lease, longest)
    return _report(found) if found is not None else None


async def read_reports(
    client: AsyncClient, namespace: str, ingress_class: str, longest: float = math.inf
) -> list[ReplicaReport]:
    leases = await read_leases(client, namespace, ingress_class, longest)
    return [_report(lease) for lease in leases]


class ReplicaLease(_ReportPublisher):
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
        more = extra or dict

        def annotations() -> dict[str, str]:
            return {APPLIED_ANNOTATION: encode(applied()), **more()}

        super().__init__(client, namespace, name, identity, ingress_class, annotations, duration)
        self._applied = applied

    def current(self, now: float) -> ReplicaReport:
        """This replica's report as it is now (the leader counts its own without
        waiting for the API round trip)."""
        applied = frozenset(PodKey(*k) for k in self._applied())
        return ReplicaReport(self._identity, now, self.duration, applied)
