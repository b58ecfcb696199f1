"""Every replica's part in Machine drains: it watches the Machines, takes the
Nodes being deleted out of rotation, and reports what its data plane measures.

- The Machines are listed and watched cluster-wide (those of the flavour's API);
  a Machine being deleted makes its Node *leaving*: the controller recomputes
  the endpoint sets without that Node's endpoints (``set_leaving_nodes``).
- The replica on a leaving Node answers its readiness probe 503
  (``node_leaving``), so its Service's endpoints, and the load balancer that
  follows them, stop sending to it.
- While a Node is leaving, the data plane is sampled (``SAMPLE_EVERY``): the
  requests in flight to the addresses taken out, and through this replica. The
  report (``report``) goes into this replica's Lease (``annotations``), where the
  leader reads it, whenever it changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from ferryman.dataplane.in_flight import InFlight
from ferryman.drains.decide import DrainReport, Flavour, MachineView, leaving_nodes, machine_view
from ferryman.kube.resources import AsyncClient, create_namespaced_resource
from ferryman.kube.watch import Backoff, Listing, Query, informer

log = logging.getLogger("ferryman.drains")

STATE_ANNOTATION = "drains.ferryman.io/state"
SAMPLE_EVERY = 0.5
_RETRY_MAX = 10.0

MACHINE_RESOURCES = {
    "openshift": create_namespaced_resource(
        "machine.openshift.io", "v1beta1", "Machine", "machines"
    ),
    "cluster-api": create_namespaced_resource("cluster.x-k8s.io", "v1beta2", "Machine", "machines"),
}


class LeavingNodes(Protocol):
    """The controller's side (``Controller``)."""

    def set_leaving_nodes(self, nodes: frozenset[str]) -> None: ...

    def leaving_applied(self) -> frozenset[str]: ...

    def left_addresses(self, node: str) -> frozenset[str]: ...


def encode(report: DrainReport) -> str:
    return json.dumps(
        {
            "node": report.node,
            "ready": report.ready,
            "applied": sorted(report.applied),
            "inFlight": dict(sorted(report.in_flight.items())),
            "replicaInFlight": report.replica_in_flight,
        },
        separators=(",", ":"),
    )


def decode(identity: str, text: str | None) -> DrainReport | None:
    """A replica's report; None when it has none (or an unreadable one: such a
    replica holds every drain until the timeout, as one that applied nothing)."""
    try:
        data = json.loads(text or "null")
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    in_flight = data.get("inFlight")
    counts = {
        str(k): (v if isinstance(v, int) and v >= 0 else None)
        for k, v in (in_flight.items() if isinstance(in_flight, dict) else ())
    }
    replica = data.get("replicaInFlight")
    applied = data.get("applied")
    return DrainReport(
        identity,
        str(data.get("node") or ""),
        data.get("ready") is not False,
        frozenset(str(n) for n in applied) if isinstance(applied, list) else frozenset(),
        counts,
        replica if isinstance(replica, int) and replica >= 0 else None,
    )


def rfc3339_seconds(text: object) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class DrainAgent:
    def __init__(
        self,
        client: AsyncClient,
        flavour: Flavour,
        identity: str,
        node: str,
        controller: LeavingNodes,
        in_flight: Callable[[], Awaitable[InFlight]],
        on_report: Callable[[], None],
    ) -> None:
        """``node``: where this replica runs ("" unknown: it never fails readiness
        for a drain); ``on_report``: the report changed (publish the Lease)."""
        self._client = client
        self.flavour = flavour
        self.resource = MACHINE_RESOURCES[flavour]
        self._identity = identity
        self._node = node
        self._controller = controller
        self._in_flight = in_flight
        self._on_report = on_report
        self.machines: dict[tuple[str, str], MachineView] = {}
        self._seen_deleting: dict[str, float] = {}  # Machine uid -> when first seen deleting
        self.synced = asyncio.Event()
        # Set on every Machine change: the leader's keeper looks again.
        self.machines_changed = asyncio.Event()
        self._wake = asyncio.Event()
        self._report = DrainReport(identity, node, True)
        if not node:
            log.warning(
                "NODE_NAME is not set: this replica will not fail readiness when its "
                "Node's Machine is deleted, and its Node gets no pre-terminate hook"
            )

    # ---- what others read ----------------------------------------------------------

    def node_leaving(self) -> bool:
        """This replica's Node is being deleted: its readiness answers 503."""
        return bool(self._node) and self._node in self._leaving()

    def report(self) -> DrainReport:
        return self._report

    def annotations(self) -> dict[str, str]:
        return {STATE_ANNOTATION: encode(self._report)}

    def applied_changed(self) -> None:
        """The controller's data plane took another set of leaving Nodes out."""
        self._wake.set()

    # ---- the Machines -------------------------------------------------------------

    def _leaving(self) -> frozenset[str]:
        return leaving_nodes(self.machines.values())

    def _upsert(self, obj: Mapping[str, Any]) -> None:
        md = obj.get("metadata") or {}
        view = machine_view(obj, self._deleting_since(md))
        if view is not None:
            self.machines[(view.namespace, view.name)] = view

    def _deleting_since(self, md: Mapping[str, Any]) -> float | None:
        """When the deletion began: ``deletionTimestamp`` has whole seconds, so
        when this watch saw it within that second, the moment it saw it."""
        stamp = rfc3339_seconds(md.get("deletionTimestamp"))
        if stamp is None:
            return None
        seen = self._seen_deleting.setdefault(str(md.get("uid") or ""), time.time())
        return seen if stamp <= seen < stamp + 1 else stamp

    def _changed(self) -> None:
        self._controller.set_leaving_nodes(self._leaving())
        self.machines_changed.set()
        self._wake.set()

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self._watch(), name="watch machines")
            tg.create_task(self._sample(), name="drain report")

    async def _watch(self) -> None:
        """List, then watch, cluster-wide; any failure lists again (what was
        deleted meanwhile goes, as in the informers of sources/kubernetes.py)."""
        await informer(
            self._client,
            Query(self.resource, namespace="*"),
            self._event,
            _interrupted,
            Backoff(0.2, _RETRY_MAX),
            on_list=self._listed,
        )

    async def _listed(self, listing: Listing) -> None:
        seen: dict[tuple[str, str], MachineView] = {}
        old, self.machines = self.machines, seen
        async for obj in listing:
            self._upsert(_plain(obj))
        uids = {m.uid for m in seen.values()}
        self._seen_deleting = {u: t for u, t in self._seen_deleting.items() if u in uids}
        self._changed()
        self.synced.set()
        del old

    async def _event(self, event: str, obj: Any) -> None:
        data = _plain(obj)
        if event == "DELETED":
            md = data.get("metadata") or {}
            self.machines.pop((md.get("namespace") or "", md.get("name") or ""), None)
            self._seen_deleting.pop(str(md.get("uid") or ""), None)
        else:
            self._upsert(data)
        self._changed()

    # ---- the report ---------------------------------------------------------------

    async def _sample(self) -> None:
        while True:
            self._wake.clear()
            applied = self._controller.leaving_applied()
            mine = self.node_leaving()
            counts: InFlight | None = None
            if applied or mine:
                try:
                    counts = await self._in_flight()
                except Exception as e:  # NGINX restarting: nothing measured this round
                    log.warning("in-flight sample failed", extra={"fields": {"error": str(e)}})
            report = DrainReport(
                self._identity,
                self._node,
                not mine,
                applied,
                {
                    node: (
                        None
                        if counts is None
                        else counts.to(addresses)
                        if counts.peers_measured or not addresses
                        else None
                    )
                    for node in sorted(applied)
                    for addresses in (self._controller.left_addresses(node),)
                },
                counts.replica if counts is not None else None,
            )
            if report != self._report:
                self._report = report
                self._on_report()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._wake.wait(), SAMPLE_EVERY if (applied or mine) else None
                )


def _interrupted(e: Exception) -> None:
    """The API or the CRD missing: list again, later."""
    log.warning("machine watch interrupted", extra={"fields": {"error": str(e)}})


def _plain(obj: Any) -> dict[str, Any]:
    data: dict[str, Any] = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
    return data
