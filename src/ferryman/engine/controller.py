"""The one worker: sync a key from the store into the desired state, then make
NGINX match it.

``sync`` turns one queued key into changes of the desired records (virtual
hosts, certificates, endpoint sets) and files. ``flush`` pushes changed records
(never a reload), then applies changed files with one test + reload (only
ferryman's own settings and the --nginx-configmaps ConfigMap change files), and
finally reports Events. ``run`` batches: while the queue holds items, or new ones
arrive within ``settings.batch.window``, no flush happens.

One resource's failure rejects that resource only: one whose parsing or
rendering raises, or whose record is too large or does not fit in NGINX's
memory, is taken out of the configuration (its records withdrawn, a Rejected
Event naming the reason) until it changes, and every other one is still synced
and pushed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

from ferryman.certificates.wanted import Asked
from ferryman.configs.configmap import ConfigMapState
from ferryman.configs.model import BackendKey
from ferryman.dataplane import DataPlane
from ferryman.dataplane.errors import PushError
from ferryman.dataplane.records import AppliedRecords, memory_refusal
from ferryman.engine.endpoint_sets import PodId
from ferryman.engine.endpoint_sets import split as split_key
from ferryman.engine.kind_spec import CONFIG_MAP, CORE, NAMESPACE, SECRET, SERVICE
from ferryman.engine.nginx_files import NginxFiles
from ferryman.engine.queue_keys import (
    LEAVING_NODES,
    RESYNC,
    LeavingNodes,
    PodAddress,
    QueueKey,
    Resync,
)
from ferryman.engine.secrets import SecretStore
from ferryman.engine.settings import Settings
from ferryman.engine.store import Store
from ferryman.engine.workqueue import WorkQueue
from ferryman.observability.metrics import Metrics
from ferryman.report import (
    ADDED_OR_UPDATED,
    ADDED_OR_UPDATED_WITH_WARNING,
    Reporter,
)
from ferryman.resources.meta import ObjectRef
from ferryman.translators import internal
from ferryman.translators.context import Context, Kinds, Shape, Sinks
from ferryman.translators.desired import DEFAULT_CERTIFICATE, Desired
from ferryman.translators.listen_ports import ListenPorts
from ferryman.translators.renders import Renders
from ferryman.translators.unbindable import Unbindable
from ferryman.wire.records import HOST_RECORDS, Record, RecordKey

log = logging.getLogger("ferryman.controller")

# A custom resource's status, NIC's fields: (ref, state, reason, message, referencedBy).
ResourceStatusSink = Callable[[ObjectRef, str, str, str, str | None], None]
# Pushes per flush: a refused record rejects its resource, whose withdrawal (and
# the hosts other resources take over) goes in the next round.
PUSH_ROUNDS = 4
# A data plane that routes per request, with no status written (manifests mode).
_ROUTED = Shape()
_NO_SINKS = Sinks()
# Events that say a resource is live: held back while its records are not.
_LIVE = (ADDED_OR_UPDATED, ADDED_OR_UPDATED_WITH_WARNING)


class Applied(Protocol):
    """What a flush observer reads: what this replica's NGINX has confirmed."""

    def applied_gated_pods(self) -> frozenset[PodId]: ...
    def leaving_applied(self) -> frozenset[str]: ...
    def gate_routed_namespaces(self) -> frozenset[str]: ...


class FlushObserver(Protocol):
    """Told after every flush (readiness gates and drains, Kubernetes mode):
    each compares what it last read of ``applied`` and acts on a change."""

    def flushed(self, applied: Applied) -> None: ...


class Controller:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        queue: WorkQueue[QueueKey],
        dataplane: DataPlane,
        secrets: SecretStore,
        reporter: Reporter,
        metrics: Metrics,
        files: Mapping[str, str],
        kinds: Kinds,
        shape: Shape = _ROUTED,
        sinks: Sinks = _NO_SINKS,
        observers: Sequence[FlushObserver] = (),
        resource_status: ResourceStatusSink | None = None,
        configmap: ConfigMapState | None = None,
    ) -> None:
        """``files``: the configuration files NGINX was started with;
        ``kinds``: the registered kinds (``wiring.BUILT_IN``), whose translators
        are built here for this worker, with ``shape`` (what the data plane serves)
        and ``sinks`` (Kubernetes mode's status); each of ``observers`` is told
        after every flush, once NGINX confirmed its records (readiness gates and
        drains read ``applied_gated_pods()`` and ``leaving_applied()`` then);
        ``resource_status`` receives each custom resource's state when its Event
        is reported (Kubernetes mode); ``configmap``: the keys of
        ``--nginx-configmaps`` and the files they render."""
        self._settings = settings
        self._queue = queue
        self._secrets = secrets
        self._reporter = reporter
        self._metrics = metrics
        self._d = Desired(settings, store, secrets)
        # Files (path -> text) change by reload; records (in Desired) by push.
        self._files = NginxFiles(files, dataplane, queue, reporter, store, configmap)
        self._applied = AppliedRecords(dataplane, settings, metrics)
        # The ports beyond the default two that kinds open (translators/listen_ports.py).
        ports = ListenPorts(self._files.desired, ipv6=not settings.listen.disable_ipv6)
        self._renders = Renders(self._d)
        context = Context(
            settings, store, queue, self._d, self._renders, self._files.route_defaults,
            self._files.desired, secrets, ports, shape, sinks,
        )  # fmt: skip
        self._translators = list(kinds.translators(context))
        self._renders.register(self._translators)
        # Kinds whose change translates their readers again (the dependency index).
        self._referenced = {s.kind for s in (*CORE, *kinds.specs) if s.referenced}
        self._needed = {k for s in kinds.specs for k in s.needs}  # read whole by a kind
        ports.on_owners_changed = self._touch
        self._files.on_unbindable = Unbindable(settings, ports, self._d, self._translators).refuse
        self._syncs = {kind: t for t in self._translators for kind in t.kinds}
        self._record_owners = {kind: t for t in self._translators for kind in t.records}
        self._leaving: frozenset[str] = frozenset()
        self._leaving_applied: frozenset[str] = frozenset()
        self._observers = tuple(observers)
        # Seconds spent turning resources into records since the last flush.
        self._generation_seconds = 0.0
        self._resource_status = resource_status
        # Set while the worker waits for work: what the reporter's writes wait
        # for, so a backlog of Events and status never delays a change's push.
        self.idle = asyncio.Event()
        # The latency histogram's questions: who serves a peer, and its pod.
        self.latency_owner = self._d.latency_owner
        self.latency_pod = self._d.latency_pod
        # What the endpoint sets know, asked as they are: served Services of a
        # namespace (gates), the Nodes in use and a leaving Node's addresses
        # taken out of rotation (machine hooks).
        self.served_services = self._d.endpoints.served_services
        self.nodes_in_use = self._d.endpoints.nodes_in_use
        self.left_addresses = self._d.endpoints.left_addresses

    def applied_gated_pods(self) -> frozenset[PodId]:
        """(namespace, name, uid) of the pods whose ferryman readiness gate is pending
        and whose address is a peer of an endpoint set this replica's NGINX has
        confirmed holding (after a successful push, verified per worker; not merely
        desired). The gate flipper turns a gate True once every replica reports
        its pod here. Empty unless ``--readiness-gates``."""
        return self._d.endpoints.confirmed_pending(self._applied.held)

    def gate_routed_namespaces(self) -> frozenset[str]:
        return self._d.endpoints.gate_routed_namespaces()  # (its docstring says why)

    # ---- machine lifecycle hooks: Nodes being drained ------------------------------

    def set_leaving_nodes(self, nodes: frozenset[str]) -> None:
        """The Nodes whose Machine is being deleted: their endpoints leave rotation
        (``EndpointSets.set_leaving``) in the worker's next batch."""
        if nodes != self._leaving:
            self._leaving = nodes
            self._queue.add(LEAVING_NODES)

    def leaving_applied(self) -> frozenset[str]:
        """The leaving Nodes whose endpoints this replica's NGINX has confirmed out
        of rotation: every endpoint set was computed with them and pushed."""
        return self._leaving_applied

    @property
    def certificates_asked(self) -> Asked:
        """What served resources ask of cert-manager (--enable-cert-manager)."""
        return self._d.certificates

    def _settle_leaving(self, outstanding: Iterable[RecordKey]) -> None:
        """Leaving Nodes count as applied once no endpoint set is outstanding
        and no change of them is queued."""
        if any(kind == Record.ENDPOINTS for kind, _ in outstanding) or LEAVING_NODES in self._queue:
            return
        self._leaving_applied = self._d.endpoints.leaving

    def set_file(self, path: str, text: str) -> None:
        self._files.desired[path] = text

    def applied_file(self, path: str) -> str | None:
        """The text of ``path`` the data plane runs (readiness: the public configuration)."""
        return self._files.applied(path)

    def set_addresses(self, addresses: tuple[str, ...]) -> None:
        """The addresses status shows; every served resource's is updated."""
        for translator in self._translators:
            translator.set_addresses(addresses)

    # ---- sync: one key -> desired state -------------------------------------------

    def sync(self, key: QueueKey) -> None:
        endpoints = self._d.endpoints
        if isinstance(key, Resync):
            return  # it only wakes the worker, which flushes after the batch
        if isinstance(key, PodAddress):
            self._queue_services(endpoints.keys_at(key.namespace, key.address))
            return
        if isinstance(key, LeavingNodes):
            self._compute_endpoints(endpoints.set_leaving(self._leaving))
            return
        ref = key
        if ref.kind in self._referenced:  # a Secret, or a kind read by others
            self._d.referenced_changed(ref)
        if (translator := self._syncs.get(ref.kind)) is not None:
            translator.sync(ref)
        elif ref.kind == SERVICE.kind:
            self._compute_endpoints(endpoints.keys_of(ref.namespace, ref.name))
            self._touch()  # a backendRef resolves, or no longer
        elif ref.kind == NAMESPACE.kind:  # opted in or out of readiness gates
            self._queue_services(endpoints.keys_in(ref.name))
        elif ref.kind == CONFIG_MAP.kind and self._files.sync_configmap(ref):
            self._d.mark_stale(self._d.config.refs())  # every route's defaults moved
        if ref.kind in self._needed:  # e.g. allowedRoutes' namespace labels, CA ConfigMaps
            self._touch()

    def status_addresses(self) -> tuple[str, ...] | None:
        """The ConfigMap's ``external-status-address``, which overrides the
        addresses ``set_addresses`` was given (None: unset)."""
        return self._files.status_addresses()

    def route_defaults(self) -> Mapping[str, str]:
        """The ConfigMap's route-level keys in force (NIC's names, normalised): the
        defaults ``nginx.org/*`` annotations override ({} without a ConfigMap)."""
        return self._files.route_defaults()

    def _queue_services(self, keys: Iterable[BackendKey]) -> None:
        """Recompute the Services feeding ``keys`` later in this batch: the queue
        holds each once, so a rollout's pod events recompute a Service once, not
        once per pod."""
        for key in keys:
            ns, svc, _ = split_key(key)
            self._queue.add(ObjectRef(SERVICE.kind, ns, svc))

    def _compute_endpoints(self, keys: Iterable[BackendKey]) -> None:
        """Recompute each; one that fails rejects its users, the others still compute."""
        for key in keys:
            try:
                self._d.endpoints.compute(key)
            except Exception as e:
                log.exception("endpoints failed", extra={"fields": {"backend": key}})
                self._d.endpoints.drop(key)
                for user in sorted(self._d.endpoints.users(key)):
                    self._renders.reject(
                        user, f"computing the endpoint set {key} failed: {internal(e)}"
                    )

    # ---- flush: desired -> NGINX ---------------------------------------------------

    async def flush(self) -> None:
        started = time.monotonic()
        self._renders.render_all(self._d.take_stale())
        self._before_flush()
        self._d.certificate_records(self._secrets)
        records = self._record_changes()
        changes = self._files.changes()
        self._metrics.generation_seconds.observe(
            self._generation_seconds + time.monotonic() - started
        )
        self._generation_seconds = 0.0
        outstanding = await self._push_records(records)
        self._settle_leaving(outstanding)
        for observer in self._observers:
            observer.flushed(self)
        await self._files.apply(changes)
        for translator in self._translators:
            translator.gauges(self._metrics)
        self._report(self._waiting(outstanding))
        for translator in self._translators:
            translator.after_flush()

    def _touch(self) -> None:
        for translator in self._translators:
            translator.touch()

    def _before_flush(self) -> None:
        for translator in self._translators:
            translator.before_flush()

    def _report(self, waiting: set[ObjectRef]) -> None:
        """Report the pending Events, but hold back those that say a resource is
        live while its records are not in NGINX yet (said once a push takes them)."""
        d = self._d
        for ref, (type_, reason, message) in sorted(d.take_events().items()):
            if reason in _LIVE and ref in waiting:
                d.hold_event(ref, (type_, reason, message))
                continue
            self._reporter.event(ref, type_, reason, message)
            if (translator := self._renders.of(ref.kind)) is not None:
                translator.reported(ref, reason, message)
            if (status := d.take_state(ref)) and self._resource_status is not None:
                self._resource_status(ref, status[0], reason, message, status[1])

    def resend_everything(self) -> None:
        """NGINX lost its memory (it was restarted): the next flush pushes all records."""
        self._applied.forget_all()
        self._queue.add(RESYNC)

    def settled(self) -> bool:
        """Everything queued is synced and NGINX holds its records (catching up)."""
        return not len(self._queue) and not self._d.has_stale() and not self._record_changes()

    def push_failing_since(self) -> float | None:
        return self._applied.failing_since  # following.py: behind after a while

    def holder(self, key: RecordKey) -> ObjectRef | None:
        """The resource record ``key`` is written for (``ferryman render``'s
        routes); None for records many share (endpoints, certificates)."""
        kind, name = key
        if kind in HOST_RECORDS and (writer := self._d.writer_of(name)) is not None:
            return writer
        owner = self._record_owners.get(kind)
        return owner.holder(kind, name) if owner else None

    def _waiting(self, outstanding: Iterable[RecordKey]) -> set[ObjectRef]:
        """Resources with some of the ``outstanding`` records NGINX does not hold yet."""
        d = self._d
        waiting: set[ObjectRef] = set()
        for kind, name in outstanding:
            if kind in HOST_RECORDS and (writer := d.writer_of(name)) is not None:
                waiting.add(writer)
            elif (owner := self._record_owners.get(kind)) and (holder := owner.holder(kind, name)):
                waiting.add(holder)
            elif kind == Record.ENDPOINTS:
                waiting |= d.endpoints.users(name)
            elif kind == Record.CERTIFICATE:
                hosts = d.hosts_with_certificate(name)
                waiting |= {w for h in hosts if (w := d.writer_of(h)) is not None}
        also: set[ObjectRef] = set()
        for translator in self._translators:
            also |= translator.waiting(waiting)
        return waiting | also

    def _record_changes(self) -> dict[RecordKey, str]:
        # "" deletes one
        return self._applied.changes(self._d.records, self._d.take_touched_records())

    async def _push_records(self, changes: dict[RecordKey, str]) -> dict[RecordKey, str]:
        """Push ``changes``; a record that is refused (too large, not encodable, no
        room in NGINX) rejects its resource, whose withdrawal goes in the next round.
        When NGINX cannot be reached, the push is retried with backoff. Returns the
        changes still outstanding (a push failed, or rejections outlasted the rounds)."""
        if not changes and not self._applied.full:
            return {}
        started = time.monotonic()
        counts: dict[str, int] = {}
        for _ in range(PUSH_ROUNDS):
            try:
                refused = await self._applied.push(changes)
            except PushError:
                log.exception("push to nginx failed; it is retried")
                self._queue.retry(RESYNC)
                return self._record_changes()
            for kind, _ in changes:
                counts[kind] = counts.get(kind, 0) + 1
            if not refused:
                break
            self._refuse(refused)
            self._d.certificate_records(self._secrets)
            changes = self._record_changes()
            if not changes:
                break
        else:
            # Withdrawals still to push: another flush, backing off in case a
            # refused record cannot be traced to a resource and comes back.
            self._queue.retry(RESYNC)
        if not changes or not refused:
            self._queue.forget(RESYNC)
            changes = {}
        self._metrics.endpoint_pushes.inc()
        self._metrics.push_seconds.observe(time.monotonic() - started)
        log.info(
            "configuration pushed",
            extra={
                "fields": {
                    "hosts": counts.get(Record.HOST, 0),
                    "certificates": counts.get(Record.CERTIFICATE, 0),
                    "endpoint_sets": counts.get(Record.ENDPOINTS, 0),
                    "seconds": round(time.monotonic() - started, 3),
                }
            },
        )
        return changes

    def _refuse(self, refused: Mapping[RecordKey, str]) -> None:
        """Reject the resources whose records were refused."""
        for (kind, name), why in sorted(refused.items()):
            if kind in HOST_RECORDS:
                if (owner := self._d.writer_of(name)) is None:
                    continue
                # No room: a host assembled from several resources sheds a share.
                translator = self._renders.of(owner.kind)
                if translator is None or not (memory_refusal(why) and translator.shed(owner, why)):
                    self._renders.reject(owner, f"the virtual host {name} {why}")
            elif kind == Record.ENDPOINTS:
                for user in sorted(self._d.endpoints.users(name)):
                    self._renders.reject(user, f"the endpoint set {name} {why}")
            elif kind == Record.CERTIFICATE and name == DEFAULT_CERTIFICATE:
                log.error("the default server TLS secret was refused: %s", why)
            elif kind == Record.CERTIFICATE:
                # The Secret becomes unusable (its users serve without TLS on
                # those hosts, with a warning) until it changes.
                namespace, _, rest = name.partition("/")
                secret = ObjectRef(SECRET.kind, namespace, rest.partition("@")[0])
                self._d.cache.refuse(secret, f"its certificate {why}")
                self._renders.render_all(self._d.readers_of(secret))
            elif (records := self._record_owners.get(kind)) is not None:
                records.refuse_record(kind, name, why)
        self._before_flush()  # records again without what was refused

    # ---- the worker ----------------------------------------------------------------

    def _sync_logged(self, ref: QueueKey) -> None:
        started = time.monotonic()
        try:
            self.sync(ref)
        except Exception as e:
            if isinstance(ref, ObjectRef) and self._renders.of(ref.kind) is not None:
                # A retry would fail the same way: rejected until it changes.
                log.exception("sync failed", extra={"fields": {"key": str(ref)}})
                self._renders.reject(ref, internal(e))
            else:
                delay = self._queue.retry(ref)
                log.exception("sync failed", extra={"fields": {"key": str(ref), "retry_in": delay}})
        else:
            self._queue.forget(ref)
        seconds = time.monotonic() - started
        self._metrics.work_seconds.observe(seconds)
        self._generation_seconds += seconds

    def skipped(self) -> list[str]:
        """The resources left to another class, and why (ferryman render lists them)."""
        return self._d.other_class.lines(self._d.policy.served)

    def skipped_counts(self) -> Counter[str]:
        """Kind -> how many of its objects are left to another class (the ready line)."""
        return self._d.other_class.counts()

    async def drain(self) -> None:
        """Start-up: sync everything queued, then apply it with one flush."""
        while len(self._queue):
            self._sync_logged(await self._queue.get())
        await self.flush()

    async def run(self) -> None:
        window = self._settings.batch.window
        while True:
            if not len(self._queue):
                self.idle.set()
            key = await self._queue.get()
            self.idle.clear()
            self._sync_logged(key)
            deadline = time.monotonic() + self._settings.batch.max_delay
            while len(self._queue) or (
                time.monotonic() < deadline and await self._queue.wait_for_item(window)
            ):
                self._sync_logged(await self._queue.get())
            await self.flush()
