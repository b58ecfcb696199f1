"""Reporting to the API server: events.k8s.io/v1 Events and Ingress status
(and, through ``gateway_status.py``, Gateway API status).

``event`` is called from the sync path and must not block it, so events and
status updates go through a queue that one task drains. Only the leader writes
(``set_leader``); a replica that becomes leader republishes every status and
the latest event of each object it saw while it was not leading.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ferryman.engine.kind_spec import OWN, ROUTING, STATE, KindSpec
from ferryman.engine.settings import CONTROLLER_NAME
from ferryman.kube import client as kube
from ferryman.kube.errors import KubeError, NotFound
from ferryman.kube.resources import AsyncClient, Ingress, Service, resource_for
from ferryman.kube.writers import Regarding, Reporter, merge_patch, write_event
from ferryman.report.gateway_status import GatewayStatusWriter, Read
from ferryman.resources.meta import ObjectRef

log = logging.getLogger("ferryman.report")

# The apiVersion an Event names its object by, for the engine's own kinds (the
# registered kinds' come from their specs).
_CORE_API_VERSIONS = {"Pod": "v1", "ConfigMap": "v1"}


# How long a write waits for the worker to be idle: a worker that never is
# (a cluster changing all the time) still lets one write through per period.
WORKER_FIRST = 1.0


def instance_name() -> str:
    return os.environ.get("POD_NAME") or socket.gethostname()


@dataclass(frozen=True)
class _Event:
    ref: ObjectRef
    type: str
    reason: str
    message: str


@dataclass(frozen=True)
class _Status:
    ref: ObjectRef
    addresses: tuple[str, ...]  # empty: clear


@dataclass(frozen=True)
class _ResourceStatus:
    """NIC's status of a custom resource: state, reason, message, and a
    VirtualServerRoute's referencedBy (None for other kinds)."""

    ref: ObjectRef
    fields: tuple[str, str, str, str | None]


class KubernetesReporter:
    def __init__(
        self,
        client: AsyncClient,
        uid_of: Callable[[ObjectRef], str | None],
        gateway_controller: str = "ferryman.io/gateway-controller",
        read: Read | None = None,
        kinds: Iterable[KindSpec] = (),
    ) -> None:
        """``gateway_controller``: the controllerName of our HTTPRoute parent
        entries; ``read``: the store's ``get`` (Gateway API status); ``kinds``:
        the registered kinds (their apiVersions, the status each is written)."""
        specs = tuple(kinds)
        self._api_versions = {**_CORE_API_VERSIONS, **{s.kind: s.api_version for s in specs}}
        # The kinds whose status ferryman writes (the status subresource), and
        # those whose status says where they are reached (NIC's externalEndpoints).
        self._status_resources = {
            s.kind: resource_for(s) for s in specs if s.status in (STATE, ROUTING)
        }
        self._routing = frozenset(s.kind for s in specs if s.status == ROUTING)
        self._client = client
        own = {s.kind: resource_for(s) for s in specs if s.status == OWN}
        self._gateway = GatewayStatusWriter(client, gateway_controller, own, read)
        self._read = read
        self._uid_of = uid_of
        self._queue: asyncio.Queue[_Event | _Status | _ResourceStatus] = asyncio.Queue()
        self._resource_wanted: dict[ObjectRef, tuple[str, str, str, str | None]] = {}
        self._leader = False
        self._written: dict[ObjectRef, tuple[str, ...]] = {}
        self._wanted: dict[ObjectRef, tuple[str, ...]] = {}
        self._unwritten: dict[ObjectRef, _Event] = {}
        self._instance = instance_name()
        # NIC's status.externalEndpoints of VirtualServers and VirtualServerRoutes.
        self._external: list[dict[str, str]] = []
        # Set while the worker has nothing to do (``defer_to``).
        self._worker_idle: asyncio.Event | None = None

    def defer_to(self, worker_idle: asyncio.Event) -> None:
        """Write only while ``worker_idle`` is set (or the worker has been busy
        for ``WORKER_FIRST``): a start's backlog of one Event and one status per
        resource (100,000 at 100,000 Ingresses) shares the event loop, and the
        API server, with the changes the worker routes."""
        self._worker_idle = worker_idle

    # Reporter protocol
    def event(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        e = _Event(ref, type_, reason, message)
        if self._leader:
            self._queue.put_nowait(e)
        else:
            # Kept (the latest per object) until this replica leads, so the
            # start-up sync's events are written by whichever replica wins.
            self._unwritten[ref] = e

    def status(self, ref: ObjectRef, addresses: tuple[str, ...]) -> None:
        """The load-balancer addresses ``ref`` should show (empty: none)."""
        self._wanted[ref] = addresses
        if self._leader and self._written.get(ref) != addresses:
            self._queue.put_nowait(_Status(ref, addresses))

    def resource_status(
        self, ref: ObjectRef, state: str, reason: str, message: str, referenced_by: str | None
    ) -> None:
        """A VirtualServer's, VirtualServerRoute's or Policy's status.state, reason and
        message, and a VirtualServerRoute's referencedBy ("": none)."""
        fields = (state, reason, message, referenced_by)
        self._resource_wanted[ref] = fields
        if self._leader:
            self._queue.put_nowait(_ResourceStatus(ref, fields))

    def gateway_api_status(self, ref: ObjectRef, status: Mapping[str, Any]) -> None:
        """The ``GatewayStatusSink`` (report/__init__.py): ``ref`` should show ``status``."""
        self._gateway.want(ref, status)

    def set_external_endpoints(self, addresses: tuple[str, ...], ports: str) -> None:
        """The addresses Ingress status shows, as NIC writes them into the status
        of every VirtualServer and VirtualServerRoute (``ports``: NIC's
        ``[80,443]``, the external Service's ports for HTTP and HTTPS)."""
        external = [{**_lb_ingress(a), "ports": ports} for a in addresses]
        if external == self._external:
            return
        self._external = external
        if self._leader:
            for ref, fields in self._resource_wanted.items():
                if ref.kind in self._routing:
                    self._queue.put_nowait(_ResourceStatus(ref, fields))

    def set_leader(self, leader: bool) -> None:
        self._leader = leader
        self._gateway.set_leader(leader)
        if leader:
            for ref, fields in self._resource_wanted.items():
                self._queue.put_nowait(_ResourceStatus(ref, fields))
            for e in self._unwritten.values():
                self._queue.put_nowait(e)
            self._unwritten.clear()
            self._written.clear()  # another replica may have written meanwhile
            for ref, addresses in self._wanted.items():
                self._queue.put_nowait(_Status(ref, addresses))

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self._gateway.run(), name="gateway-status")
            await self._drain()

    async def _drain(self) -> None:
        while True:
            item = await self._queue.get()
            if not self._leader:
                continue
            await self._after_worker()
            try:
                if isinstance(item, _Event):
                    await self._write_event(item)
                elif isinstance(item, _ResourceStatus):
                    await self._write_resource_status(item)
                else:
                    await self._write_status(item)
            except NotFound:
                pass  # the object is gone: nothing to report on
            except KubeError as e:
                log.warning("report failed", extra={"fields": {"error": str(e)}})
            except Exception as e:  # API unreachable: status is retried, events dropped
                log.warning("report failed", extra={"fields": {"error": str(e)}})
                if not isinstance(item, _Event):
                    await asyncio.sleep(1)
                    self._queue.put_nowait(item)

    async def _after_worker(self) -> None:
        idle = self._worker_idle
        if idle is not None and not idle.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(idle.wait(), WORKER_FIRST)

    async def _write_event(self, e: _Event) -> None:
        regarding = Regarding(
            self._api_versions.get(e.ref.kind), e.ref.kind, e.ref.namespace, e.ref.name,
            self._uid_of(e.ref),
        )  # fmt: skip
        await write_event(
            self._client, Reporter(CONTROLLER_NAME, self._instance), regarding,
            action="Sync", reason=e.reason, note=e.message, type_=e.type,
        )  # fmt: skip

    async def _write_status(self, s: _Status) -> None:
        if self._wanted.get(s.ref) != s.addresses or self._written.get(s.ref) == s.addresses:
            return  # superseded, or already there
        stored = self._read(s.ref.kind, s.ref.namespace, s.ref.name) if self._read else None
        if s.ref in self._written:
            # Written since this replica leads: the store may not show that write
            # yet (its watch event is on the way), so it cannot say what is there.
            have = self._written[s.ref]
        elif stored is not None:
            # What the informer last saw (NIC reads its cache too): no read per
            # Ingress, and no write at all where the status is already right.
            have = _addresses(stored.get("status"))
        else:
            current = await kube.get(self._client, Ingress, s.ref.name, namespace=s.ref.namespace)
            have = _addresses(current.to_dict().get("status"))
        if have != s.addresses:
            # A merge patch replaces the list whole: no read-modify-write
            # conflict to retry, and fields other controllers own stay.
            await merge_patch(
                self._client,
                Ingress,
                s.ref.name,
                {"status": {"loadBalancer": {"ingress": [_lb_ingress(a) for a in s.addresses]}}},
                namespace=s.ref.namespace,
                status=True,
            )
        self._written[s.ref] = s.addresses

    async def _write_resource_status(self, s: _ResourceStatus) -> None:
        if self._resource_wanted.get(s.ref) != s.fields:
            return  # superseded
        resource = self._status_resources[s.ref.kind]
        current = await kube.get(self._client, resource, s.ref.name, namespace=s.ref.namespace)
        have = current.get("status") or {}
        state, reason, message, referenced_by = s.fields
        status = {"state": state, "reason": reason, "message": message}
        if referenced_by is not None:
            status["referencedBy"] = referenced_by
        wanted: dict[str, Any] = dict(status)
        if s.ref.kind in self._routing:
            # NIC omits the list when there is no address (a merge patch's null).
            wanted["externalEndpoints"] = self._external or None
        if all(have.get(k) == v or (have.get(k) is None and not v) for k, v in wanted.items()):
            return  # already there (read: a recreated object starts without status)
        # A merge patch of the status subresource: NIC's fields, nothing else touched.
        await merge_patch(
            self._client, resource, s.ref.name, {"status": wanted}, namespace=s.ref.namespace,
            status=True,
        )  # fmt: skip


def _addresses(status: Any) -> tuple[str, ...]:
    """The addresses an Ingress's status shows (its ``status`` as the API has it)."""
    lb = status.get("loadBalancer") if isinstance(status, Mapping) else None
    found = lb.get("ingress") if isinstance(lb, Mapping) else None
    if not isinstance(found, list):
        return ()
    return tuple(
        str(i.get("ip") or i.get("hostname") or "") for i in found if isinstance(i, Mapping)
    )


def _lb_ingress(address: str) -> dict[str, str]:
    if address.replace(".", "").isdigit() or ":" in address:
        return {"ip": address}
    return {"hostname": address}


async def external_addresses(client: AsyncClient, service: str) -> tuple[tuple[str, ...], str]:
    """The addresses of ferryman's own Service: LoadBalancer ingress, else external
    IPs; and its ports as NIC reports them (those whose targetPort is 80, 443,
    "http" or "https": ``[80,443]``)."""
    namespace, _, name = service.partition("/")
    try:
        svc = await kube.get(client, Service, name, namespace=namespace)
    except KubeError as e:
        log.warning("external service unreadable", extra={"fields": {"error": str(e)}})
        return (), ""
    ports = [
        str(p.port)
        for p in (svc.spec.ports or [] if svc.spec else [])
        if p.targetPort in (80, 443, "http", "https")
    ]
    lb = svc.status.loadBalancer if svc.status else None
    found = [i.ip or i.hostname or "" for i in (lb.ingress if lb and lb.ingress else [])]
    if not found and svc.spec and svc.spec.externalIPs:
        found = list(svc.spec.externalIPs)
    return tuple(a for a in found if a), f"[{','.join(ports)}]"
