"""The one worker: sync a key from the store into the desired state, then make
NGINX match it.

``sync`` turns one queued key into changes of the desired records (virtual
hosts, certificates, endpoint sets) and files. ``flush`` pushes changed records
(never a reload), then applies changed files with one test + reload (only
ferryman's own settings change files), and finally reports Events. ``run``
batches: while the queue holds items, or new ones arrive within
``batch_window``, no flush happens.

One resource's failure rejects that resource only: an Ingress whose parsing or
rendering raises, or whose record is too large or does not fit in NGINX's
memory, is taken out of the configuration (its records withdrawn, a Rejected
Event naming the reason) until it changes, and every other one is still synced
and pushed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from ferryman.configs.ingress import secret_names, virtual_hosts
from ferryman.configs.ingress_hosts import Written, ingress_records
from ferryman.configs.ingress_mergeable import (
    NO_MASTER,
    ingress_kinds,
    mergeable_host,
    minion_event,
)
from ferryman.configs.model import BackendKey, VirtualHost
from ferryman.configs.policy_status import policy_status
from ferryman.configs.routes import encode_host
from ferryman.configs.virtualserver import vs_records
from ferryman.configs.vs_delegation import resolve
from ferryman.configuration import Configuration, HostPolicy, covering_wildcard
from ferryman.dataplane import DataPlane, RecordKey
from ferryman.dataplane.errors import ConfigError, ConfigTestError, PushError
from ferryman.dataplane.records import AppliedRecords
from ferryman.dependencies import Dependencies
from ferryman.endpoint_sets import EndpointSets, PodId
from ferryman.endpoint_sets import split as split_key
from ferryman.metrics import Metrics
from ferryman.reads import MERGEABLE_HOST, REFERENCED, Cache, Reads
from ferryman.report import (
    ADDED_OR_UPDATED,
    ADDED_OR_UPDATED_WITH_WARNING,
    NORMAL,
    REJECTED,
    WARNING,
    Reporter,
)
from ferryman.resources.ingress import Ingress, parse_ingress
from ferryman.resources.ingressclass import (
    CONTROLLER_NAME,
    ClassPolicy,
    parse_ingress_class,
    raw_class_name,
)
from ferryman.resources.meta import InvalidResource, ObjectRef, valid_or_none
from ferryman.resources.pod import addresses_to_resync
from ferryman.resources.service import service_name_of
from ferryman.resources.virtualserver import VirtualServer, parse_virtual_server
from ferryman.secrets import SecretStore
from ferryman.settings import Settings
from ferryman.store import Store
from ferryman.vsr_status import INVALID, VALID, WARNING_STATE, RouteStatuses
from ferryman.workqueue import WorkQueue

log = logging.getLogger("ferryman.controller")

StatusSink = Callable[[ObjectRef, tuple[str, ...]], None]
# A custom resource's status: (ref, state, reason, message, referencedBy), NIC's
# fields; referencedBy only for a VirtualServerRoute.
ResourceStatusSink = Callable[[ObjectRef, str, str, str, str | None], None]
# A key that syncs nothing: it wakes the worker so that it flushes.
RESYNC = ObjectRef("Resync", "", "")
# The key of a pod's address (readiness gates): its name is the address.
POD_ADDRESS = "PodAddress"
# The key that takes the Nodes being drained (machine lifecycle hooks) into account.
LEAVING_NODES = ObjectRef("LeavingNodes", "", "")
# Pushes per flush: a refused record rejects its resource, whose withdrawal (and
# the hosts other Ingresses take over) goes in the next round.
PUSH_ROUNDS = 4
# Events that say a resource is live: held back while its records are not.
_LIVE = (ADDED_OR_UPDATED, ADDED_OR_UPDATED_WITH_WARNING)
# A reload that tested good but was not taken is tried again after this many
# seconds, doubling per failure up to the maximum.
RELOAD_RETRY_BASE = 1.0
RELOAD_RETRY_MAX = 30.0


def keys_for_event(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[ObjectRef]:
    """Map a stored object (and its previous version) to the keys to sync."""
    kind = str(obj.get("kind"))
    md = obj.get("metadata") or {}
    ns, name = str(md.get("namespace") or ""), str(md.get("name") or "")
    if kind == "EndpointSlice":
        keys = []
        for o in (obj, old):
            if o is not None and (svc := service_name_of(o)):
                keys.append(ObjectRef("Service", ns, svc))
        return keys
    if kind == "Pod":
        return [ObjectRef(POD_ADDRESS, ns, ip) for ip in addresses_to_resync(obj, old)]
    return [ObjectRef(kind, ns, name)]


class Controller:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        queue: WorkQueue[ObjectRef],
        dataplane: DataPlane,
        secrets: SecretStore,
        reporter: Reporter,
        metrics: Metrics,
        files: Mapping[str, str],
        status: StatusSink | None = None,
        on_gates_applied: Callable[[], None] | None = None,
        on_leaving_applied: Callable[[], None] | None = None,
        resource_status: ResourceStatusSink | None = None,
        virtual_servers: bool = True,
    ) -> None:
        """``files``: the configuration files NGINX was started with; ``status``
        receives each Ingress's load-balancer addresses (Kubernetes mode);
        ``on_gates_applied`` is called after each flush that changed
        ``applied_gated_pods()`` (readiness gates: the gate flipper reads it then);
        ``on_leaving_applied`` after each flush that changed ``leaving_applied()``;
        ``resource_status`` receives each VirtualServer's and Policy's state when
        its Event is reported (Kubernetes mode); ``virtual_servers``: the data plane routes
        VirtualServers (the Lua router; Angie's classic configuration does not)."""
        self._settings = settings
        self._store = store
        self._queue = queue
        self._dataplane = dataplane
        self._secrets = secrets
        self._reporter = reporter
        self._metrics = metrics
        policy = settings.allowed_host_suffixes
        self._config = Configuration(HostPolicy(policy) if policy else None)
        self._policy = ClassPolicy(settings.ingress_class, None)
        # Desired and applied state: files (path -> text) and pushed records.
        self._files: dict[str, str] = dict(files)
        self._applied_files: dict[str, str] = dict(files)
        self._records: dict[RecordKey, str] = {}
        self._applied = AppliedRecords(dataplane, settings, metrics)
        # Who wrote each virtual host, and which hosts each Ingress wrote.
        self._host_writer: dict[str, ObjectRef] = {}
        self._ref_hosts: dict[ObjectRef, set[str]] = {}
        self._host_cert: dict[str, str] = {}
        gates = settings.ingress_class if settings.readiness_gates else None
        self._endpoints = EndpointSets(
            store, self._records, gates, track_nodes=settings.machine_lifecycle_hooks != "off"
        )
        self._leaving: frozenset[str] = frozenset()
        self._leaving_applied: frozenset[str] = frozenset()
        self._on_leaving_applied = on_leaving_applied
        self._on_gates_applied = on_gates_applied
        self._applied_gated: frozenset[PodId] = frozenset()
        # What each resource's translation read (Secrets, and the kinds in
        # REFERENCED): a change to one of those translates its readers again.
        self._deps = Dependencies()
        self._cache = Cache(store, secrets)
        # Readers of changed REFERENCED objects, translated once per batch: a
        # selector's reader would otherwise be translated once per object read.
        self._stale: set[ObjectRef] = set()
        self._pending: dict[ObjectRef, tuple[str, str, str]] = {}
        # Each Policy's spec when it was last reported (its own status and Event).
        self._policy_specs: dict[ObjectRef, object] = {}
        # Seconds spent turning resources into records since the last flush.
        self._generation_seconds = 0.0
        self._status = status
        self._resource_status = resource_status
        self._virtual_servers = virtual_servers
        # The state each VirtualServer's pending Event reports (NIC's status.state).
        self._states: dict[ObjectRef, str] = {}
        self._referenced_by: dict[ObjectRef, str] = {}  # a VirtualServerRoute's
        self._routes = RouteStatuses(
            self._cache, lambda: self._policy.served, self._host_writer.get, self._route_status
        )
        self._addresses: tuple[str, ...] = ()
        self._status_shown: set[ObjectRef] = set()
        self._reload_failures = 0  # unconfirmed reloads in a row (for the retry's backoff)

    def latency_owner(self, host: str, backend: str, server: str) -> ObjectRef | None:
        """The Ingress routing virtual host ``host`` to ``backend`` when ``server``
        (``address:port`` as NGINX logs it) is one of that backend's peers; None
        for anything else (a forged or stale latency sample)."""
        owner = self._host_writer.get(host)
        if owner is None or backend not in self._endpoints.backends_of(owner):
            return None
        peers = self._records.get(("E", backend))
        address, _, port = server.rpartition(":")
        return owner if peers and f"{address.strip('[]')}#{port}" in peers.split(" ") else None

    def served_services(self, namespace: str) -> frozenset[str]:
        """Names of the Services in ``namespace`` that a served Ingress routes to
        (readiness gates: which pods a gate is for)."""
        return self._endpoints.served_services(namespace)

    def applied_gated_pods(self) -> frozenset[PodId]:
        """(namespace, name, uid) of the pods whose ferryman readiness gate is pending
        and whose address is a peer of an endpoint set this replica's NGINX has
        confirmed holding (after a successful push, verified per worker; not merely
        desired). The gate flipper turns a gate True once every replica reports
        its pod here. Empty unless ``--readiness-gates``."""
        return self._endpoints.confirmed_pending(self._applied.held)

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

    def nodes_in_use(self) -> frozenset[str]:
        """The Nodes running endpoints that served Ingresses route to."""
        return self._endpoints.nodes_in_use()

    def left_addresses(self, node: str) -> frozenset[str]:
        """Addresses on ``node`` taken out of rotation because it is leaving."""
        return self._endpoints.left_addresses(node)

    def _tell_leaving_applied(self, outstanding: Iterable[RecordKey]) -> None:
        if any(kind == "E" for kind, _ in outstanding) or LEAVING_NODES in self._queue:
            return
        if self._endpoints.leaving != self._leaving_applied:
            self._leaving_applied = self._endpoints.leaving
            if self._on_leaving_applied is not None:
                self._on_leaving_applied()

    def _tell_gates_applied(self) -> None:
        if self._on_gates_applied is None:
            return
        applied = self.applied_gated_pods()
        if applied != self._applied_gated:
            self._applied_gated = applied
            self._on_gates_applied()

    def set_file(self, path: str, text: str) -> None:
        self._files[path] = text

    def applied_file(self, path: str) -> str | None:
        """The text of ``path`` the data plane runs (readiness: the public configuration)."""
        return self._applied_files.get(path)

    def set_addresses(self, addresses: tuple[str, ...]) -> None:
        """The addresses Ingress status shows; every served Ingress is updated."""
        if addresses != self._addresses:
            self._addresses = addresses
            for ref in self._config.refs():
                self._publish_status(ref)

    def _publish_status(self, ref: ObjectRef) -> None:
        if self._status is None or ref.kind != "Ingress":
            return
        if ref in self._ref_hosts:
            self._status(ref, self._addresses)
            self._status_shown.add(ref)
        elif ref in self._status_shown:  # rejected, deleted or no longer ours: clear
            self._status(ref, ())
            self._status_shown.discard(ref)

    # ---- sync: one key -> desired state -------------------------------------------

    def sync(self, ref: ObjectRef) -> None:
        if ref.kind == "Ingress":
            self._sync_ingress(ref)
        elif ref.kind == "VirtualServer":
            self._sync_virtual_server(ref)
        elif ref.kind == "IngressClass":
            self._sync_class(ref)
        elif ref.kind == "Service":
            self._compute_endpoints(self._endpoints.keys_of(ref.namespace, ref.name))
        elif ref.kind == POD_ADDRESS:
            self._queue_services(self._endpoints.keys_at(ref.namespace, ref.name))
        elif ref.kind == "Namespace":  # opted in or out of readiness gates
            self._queue_services(self._endpoints.keys_in(ref.name))
        elif ref.kind in REFERENCED:
            if ref.kind == "Policy" and not self._policy_changed(ref):
                return  # only its status or metadata moved
            self._cache.forget(ref)
            self._stale |= self._deps.users(ref)
            if ref.kind == "VirtualServerRoute":
                self._routes.changed(ref)
        elif ref == LEAVING_NODES:
            self._compute_endpoints(self._endpoints.set_leaving(self._leaving))

    def _policy_changed(self, ref: ObjectRef) -> bool:
        """Report a changed Policy's own status and Event (NIC's syncPolicy); False
        when its spec is as it was (its status write comes back as a change)."""
        obj = self._store.get("Policy", ref.namespace, ref.name)
        spec = obj.get("spec") if obj is not None else None
        if ref in self._policy_specs and self._policy_specs[ref] == spec:
            return False
        if obj is None:
            self._policy_specs.pop(ref, None)
            return True
        self._policy_specs[ref] = spec
        if (status := policy_status(obj, self._policy.served)) is not None:
            self._vs_event(ref, status.state, status.reason, status.message)
        return True

    def _queue_services(self, keys: Iterable[BackendKey]) -> None:
        """Recompute the Services feeding ``keys`` later in this batch: the queue
        holds each once, so a rollout's pod events recompute a Service once, not
        once per pod."""
        for key in keys:
            ns, svc, _ = split_key(key)
            self._queue.add(ObjectRef("Service", ns, svc))

    def _compute_endpoints(self, keys: Iterable[BackendKey]) -> None:
        """Recompute each; one that fails rejects its users, the others still compute."""
        for key in keys:
            try:
                self._endpoints.compute(key)
            except Exception as e:
                log.exception("endpoints failed", extra={"fields": {"backend": key}})
                self._endpoints.drop(key)
                for user in sorted(self._endpoints.users(key)):
                    self._reject(user, f"computing the endpoint set {key} failed: {_internal(e)}")

    def _event(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        self._pending[ref] = (type_, reason, message)

    def _sync_ingress(self, ref: ObjectRef) -> None:
        obj = self._store.get("Ingress", ref.namespace, ref.name)
        self._merged_hosts_changed(ref)
        try:
            ing = self._parse_ingress(ref, obj)
            self._merged_hosts_changed(ref, ing)
            affected = self._config.upsert(ing) if ing else self._config.delete(ref)
        except Exception as e:
            log.exception("sync failed", extra={"fields": {"key": str(ref)}})
            self._reject(ref, _internal(e))
            return
        self._render_all(affected)
        if ing is None:
            if obj is None:
                self._status_shown.discard(ref)  # deleted: no status to clear
            else:
                self._publish_status(ref)

    def _merged_hosts_changed(self, ref: ObjectRef, ing: Ingress | None = None) -> None:
        """A master or minion changed (``ing``; else as it was): translate the
        others of its host again (configs/ingress_mergeable.py)."""
        if ing is None:
            self._cache.forget(ref)
            old = self._config.get(ref)
            ing = old if isinstance(old, Ingress) else None
        if (host := mergeable_host(ing)) is not None:
            self._stale |= self._deps.users(ObjectRef(MERGEABLE_HOST, "", host)) - {ref}

    def _parse_ingress(self, ref: ObjectRef, obj: Mapping[str, Any] | None) -> Ingress | None:
        """The Ingress to serve, or None (absent, not ours, or invalid: an Event says why)."""
        if obj is None or not self._policy.accepts(raw_class_name(obj)):
            return None
        try:
            return parse_ingress(obj)
        except InvalidResource as e:
            self._event(ref, WARNING, REJECTED, f"{ref.namespace}/{ref.name} was rejected: {e}")
            return None

    def _sync_virtual_server(self, ref: ObjectRef) -> None:
        obj = self._store.get("VirtualServer", ref.namespace, ref.name)
        vs = None
        # NIC serves a VirtualServer without a class whatever the default class is.
        if obj is not None and _vs_class(obj) in ("", self._policy.served):
            parsed = parse_virtual_server(obj)
            vs = parsed.resource
            error = parsed.message()
            if vs is not None and not self._virtual_servers:
                vs, error = (
                    None,
                    "VirtualServers are routed by the nginx data plane only (ferryman)",
                )
            if vs is None:
                who = f"{ref.namespace}/{ref.name}"
                message = f"VirtualServer {who} was rejected with error: {error}"
                self._vs_event(ref, INVALID, REJECTED, message)
        old = self._config.get(ref)
        if vs is not None and isinstance(old, VirtualServer) and _same(old, vs):
            return  # only its status or resourceVersion moved
        affected = self._config.upsert(vs) if vs else self._config.delete(ref)
        self._render_all(affected)

    def _vs_event(self, ref: ObjectRef, state: str, reason: str, message: str) -> None:
        self._event(ref, NORMAL if state == VALID else WARNING, reason, message)
        self._states[ref] = state

    def _route_status(
        self, ref: ObjectRef, state: str, reason: str, message: str, referenced_by: str
    ) -> None:
        self._vs_event(ref, state, reason, message)
        self._referenced_by[ref] = referenced_by

    def _render_all(self, refs: Iterable[ObjectRef]) -> None:
        """Render each; one that fails is rejected and the others still render."""
        for ref in sorted(refs):
            try:
                self._render(ref)
            except Exception as e:
                log.exception("render failed", extra={"fields": {"key": str(ref)}})
                self._reject(ref, _internal(e))

    def _reject(self, ref: ObjectRef, reason: str) -> None:
        """Take ``ref`` out of the configuration until it changes: withdraw what it
        wrote, hand its hosts to the next claimants, say why in a Rejected Event."""
        self._event(ref, WARNING, REJECTED, f"{ref.namespace}/{ref.name} was rejected: {reason}")
        if ref.kind == "VirtualServer":
            self._states[ref] = INVALID
        affected = self._config.delete(ref)
        try:
            self._withdraw(ref)
        except Exception:
            log.exception("withdrawing records failed", extra={"fields": {"key": str(ref)}})
        self._render_all(affected - {ref})

    def _withdraw(self, ref: ObjectRef) -> None:
        """Drop every record ``ref`` wrote, without trusting ``_ref_hosts``: a render
        that failed half-way may have written hosts it has not recorded there."""
        self._ref_hosts.pop(ref, None)
        for host in [h for h, writer in self._host_writer.items() if writer == ref]:
            self._drop_host(host)
        self._declare(ref, ())
        self._endpoints.set_backends(ref, frozenset())
        if ref.kind == "VirtualServer":
            self._routes.served(ref, None, {})

    def _drop_host(self, host: str) -> None:
        del self._host_writer[host]
        self._records.pop(("H", host), None)
        self._records.pop(("V", host), None)
        self._records.pop(("M", host), None)
        self._records.pop(("F", host), None)
        self._host_cert.pop(host, None)

    def _write_host(
        self,
        ref: ObjectRef,
        vh: VirtualHost,
        routing: str | None,
        client_check: str | None = None,
        fast: str | None = None,
    ) -> None:
        """``vh``'s H record and, for a VirtualServer, its V record (``routing``),
        M record (``client_check``: ingressMTLS) and F record (``fast``: vs_fast)."""
        self._records[("H", vh.host)] = encode_host(vh)
        for kind, value in (("V", routing), ("M", client_check), ("F", fast)):
            if value is None:
                self._records.pop((kind, vh.host), None)
            else:
                self._records[(kind, vh.host)] = value
        self._host_writer[vh.host] = ref
        if vh.cert_id:
            self._host_cert[vh.host] = vh.cert_id
        else:
            self._host_cert.pop(vh.host, None)

    def _render_virtual_server(self, ref: ObjectRef, vs: VirtualServer | None) -> None:
        old_hosts = self._ref_hosts.pop(ref, set())
        owned = self._config.owned_hosts(ref) if vs is not None else ()
        secret = vs.tls.secret if vs is not None and vs.tls and vs.tls.secret else None
        reads = Reads(self._cache)
        state = reads.secret(ref.namespace, secret) if secret else None
        delegations = resolve(vs, reads, self._policy.served) if vs and owned else None
        self._declare(ref, reads.refs)
        for host in old_hosts - set(owned):
            if self._host_writer.get(host) == ref:
                self._drop_host(host)
        if vs is None:
            self._endpoints.set_backends(ref, frozenset())
            self._routes.served(ref, None, {})
            return
        who = f"{ref.namespace}/{ref.name}"
        if delegations is None:
            self._endpoints.set_backends(ref, frozenset())
            self._routes.served(ref, vs.host, {})
            # NIC's words: the resource is kept, its host is served by another.
            self._vs_event(ref, WARNING_STATE, REJECTED, "Host is taken by another resource")
            return
        out = vs_records(
            vs, state, reads=reads, ingress_class=self._policy.served, delegated=delegations.routes
        )
        self._declare(ref, reads.refs)
        self._write_host(ref, out.host, out.record, out.client_check, out.fast)
        self._ref_hosts[ref] = {out.host.host}
        self._endpoints.set_backends(ref, out.backends)
        self._routes.served(ref, vs.host, out.routes)
        if warnings := delegations.warnings + out.warnings:
            self._vs_event(
                ref,
                WARNING_STATE,
                ADDED_OR_UPDATED_WITH_WARNING,
                f"Configuration for {who} was added or updated with warning(s): "
                + "; ".join(warnings),
            )
        else:
            # NIC's text, its trailing space included.
            message = f"Configuration for {who} was added or updated "
            self._vs_event(ref, VALID, ADDED_OR_UPDATED, message)

    def _render(self, ref: ObjectRef) -> None:
        """Rewrite the virtual hosts ``ref`` owns; drop those it no longer owns."""
        if ref.kind == "VirtualServer":
            res = self._config.get(ref)
            self._render_virtual_server(ref, res if isinstance(res, VirtualServer) else None)
            return
        ing = self._config.get(ref)
        assert not isinstance(ing, VirtualServer)
        old_hosts = self._ref_hosts.pop(ref, set())
        vhosts: list[VirtualHost] = []
        warnings: list[str] = []
        reads = Reads(self._cache)
        written: list[Written] = []
        mergeable = None
        if ing is not None:
            states = {n: reads.secret(ref.namespace, n) for n in secret_names(ing)}
            vhosts, warnings = virtual_hosts(ing, self._config.owned_hosts(ref), states)
            if (host := mergeable_host(ing)) is not None:
                found = reads.mergeable(host)
                mergeable = [m for m in found if self._policy.accepts(m.class_name)]
            # The ConfigMap's keys are the defaults here once it is read (issue 16).
            outcome = ingress_records(
                ing,
                vhosts,
                reads,
                self._policy.served,
                {},
                slow_path=self._virtual_servers,
                mergeable=mergeable,
            )
            written = outcome.written
            warnings += outcome.warnings
        self._declare(ref, reads.refs)
        new_hosts = {vh.host for vh in vhosts}
        for host in old_hosts - new_hosts:
            if self._host_writer.get(host) == ref:
                self._drop_host(host)
        for w in written:
            self._write_host(ref, w.host, w.routing, fast=w.fast)
        if new_hosts:
            self._ref_hosts[ref] = new_hosts
        backends: set[BackendKey] = set()
        for w in written:
            backends |= w.backends
        self._endpoints.set_backends(ref, frozenset(backends))
        if ing is not None and ing.mergeable == "minion":
            warn, reason, message = minion_event(ing, mergeable or [], warnings)
            self._event(ref, WARNING if warn else NORMAL, reason, message)
            if reason != NO_MASTER:
                self._ref_hosts[ref] = set()  # served (its master's host): status shown
        elif ing is not None:
            self._report(ref, bool(vhosts), warnings)

    def _report(self, ref: ObjectRef, serving: bool, warnings: list[str]) -> None:
        taken = [
            f"host {h or '(any host)'} is taken by {o.namespace}/{o.name}"
            for h, o in sorted(self._config.lost_hosts(ref).items())
        ]
        denied = [
            f"host {h or '(any host)'} is not allowed in namespace {ref.namespace} "
            "(--allowed-host-suffixes)"
            for h in self._config.denied_hosts(ref)
        ]
        warnings = warnings + [
            f"host {h} under {covering_wildcard(h)} is served by {o.namespace}/{o.name} "
            "(an exact host wins over a wildcard)"
            for h, o in sorted(self._config.shadowed(ref).items())
        ]
        who = f"{ref.namespace}/{ref.name}"
        if not serving:
            # NIC's words when only ownership is in the way.
            lead = "No host can be served" if denied else "All hosts are taken by other resources"
            self._event(ref, WARNING, REJECTED, f"{lead}: {'; '.join(taken + denied)}")
        elif taken or denied or warnings:
            self._event(
                ref,
                WARNING,
                ADDED_OR_UPDATED_WITH_WARNING,
                f"Configuration for {who} was added or updated with warning(s): "
                + "; ".join(taken + denied + warnings),
            )
        else:
            self._event(
                ref, NORMAL, ADDED_OR_UPDATED, f"Configuration for {who} was added or updated"
            )

    def _sync_class(self, ref: ObjectRef) -> None:
        if ref.name != self._settings.ingress_class:
            return
        cls = valid_or_none(parse_ingress_class, self._store.get("IngressClass", "", ref.name))
        if cls is not None and cls.controller != CONTROLLER_NAME:
            log.warning(
                "IngressClass names another controller; serving only Ingresses that name it",
                extra={"fields": {"class": cls.name, "controller": cls.controller}},
            )
            cls = None
        policy = ClassPolicy(self._settings.ingress_class, cls)
        if policy != self._policy:
            self._policy = policy
            for ing_ref in self._store.refs("Ingress"):
                self._queue.add(ing_ref)

    # ---- secrets -------------------------------------------------------------------

    def _declare(self, ref: ObjectRef, used: Iterable[ObjectRef]) -> None:
        for gone in self._deps.declare(ref, used):
            if not self._deps.used(gone):
                self._cache.forget(gone)

    def _certificate_records(self) -> None:
        """Push exactly the certificates some virtual host refers to."""
        needed = set(self._host_cert.values())
        for key in [k for k in self._records if k[0] == "C" and k[1] not in needed]:
            del self._records[key]
        for cert_id in needed:
            if ("C", cert_id) not in self._records:
                record = self._secrets.record(cert_id)
                if record is not None:
                    self._records[("C", cert_id)] = record

    # ---- flush: desired -> NGINX ---------------------------------------------------

    async def flush(self) -> None:
        started = time.monotonic()
        stale, self._stale = self._stale, set()
        self._render_all(stale)
        self._certificate_records()
        records = self._record_changes()
        changes: dict[str, str | None] = {
            p: t for p, t in self._files.items() if self._applied_files.get(p) != t
        }
        self._metrics.generation_seconds.observe(
            self._generation_seconds + time.monotonic() - started
        )
        self._generation_seconds = 0.0
        outstanding = await self._push_records(records)
        self._tell_gates_applied()
        self._tell_leaving_applied(outstanding)
        if changes:
            await self._reload(changes)
        for kind, count in ingress_kinds(self._config.get(r) for r in self._config.refs()).items():
            self._metrics.ingress_resources.labels(type=kind).set(count)
        self._metrics.virtualserver_resources.set(self._config.count("VirtualServer"))
        self._metrics.virtualserverroute_resources.set(self._routes.count())
        waiting = self._waiting(outstanding)
        pending, self._pending = self._pending, {}
        for ref, (type_, reason, message) in sorted(pending.items()):
            if reason in _LIVE and ref in waiting:
                # Its records are not in NGINX yet: said once a push takes them.
                self._pending.setdefault(ref, (type_, reason, message))
                continue
            self._reporter.event(ref, type_, reason, message)
            if ref.kind == "Ingress":
                self._publish_status(ref)
            elif (state := self._states.pop(ref, None)) and self._resource_status is not None:
                by = self._referenced_by.pop(ref, None)
                self._resource_status(ref, state, reason, message, by)

    def resend_everything(self) -> None:
        """NGINX lost its memory (it was restarted): the next flush pushes all records."""
        self._applied.forget_all()
        self._queue.add(RESYNC)

    def _waiting(self, outstanding: Iterable[RecordKey]) -> set[ObjectRef]:
        """Ingresses with some of the ``outstanding`` records NGINX does not hold yet."""
        waiting: set[ObjectRef] = set()
        for kind, name in outstanding:
            if kind in ("H", "V", "M", "F") and (writer := self._host_writer.get(name)) is not None:
                waiting.add(writer)
            elif kind == "E":
                waiting |= self._endpoints.users(name)
            elif kind == "C":
                hosts = [h for h, cert in self._host_cert.items() if cert == name]
                waiting |= {w for h in hosts if (w := self._host_writer.get(h)) is not None}
        return waiting | self._routes.serving(waiting)

    def _record_changes(self) -> dict[RecordKey, str]:
        """Records that differ from what NGINX holds ("" deletes one)."""
        return self._applied.changes(self._records)

    async def _push_records(self, changes: dict[RecordKey, str]) -> dict[RecordKey, str]:
        """Push ``changes``; a record that is refused (too large, not encodable, no
        room in NGINX) rejects its resource, whose withdrawal goes in the next round.
        When NGINX cannot be reached, the push is retried with backoff. Returns the
        changes still outstanding (a push failed, or rejections outlasted the rounds)."""
        if not changes and not self._applied.full:
            return {}
        started = time.monotonic()
        counts = dict.fromkeys("HCE", 0)
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
            self._certificate_records()
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
                    "hosts": counts["H"],
                    "certificates": counts["C"],
                    "endpoint_sets": counts["E"],
                    "seconds": round(time.monotonic() - started, 3),
                }
            },
        )
        return changes

    def _refuse(self, refused: Mapping[RecordKey, str]) -> None:
        """Reject the resources whose records were refused."""
        for (kind, name), why in sorted(refused.items()):
            if kind in ("H", "V", "M", "F"):
                if (owner := self._host_writer.get(name)) is not None:
                    self._reject(owner, f"the virtual host {name} {why}")
            elif kind == "E":
                for user in sorted(self._endpoints.users(name)):
                    self._reject(user, f"the endpoint set {name} {why}")
            elif kind == "C":
                # The Secret becomes unusable (its users serve without TLS on
                # those hosts, with a warning) until it changes.
                namespace, _, rest = name.partition("/")
                secret = ObjectRef("Secret", namespace, rest.partition("@")[0])
                self._cache.refuse(secret, f"its certificate {why}")
                self._render_all(self._deps.users(secret))

    async def _reload(self, changes: Mapping[str, str | None]) -> None:
        """Apply changed files; the data plane counts and logs the reload."""
        try:
            await self._dataplane.apply(changes)
        except ConfigTestError:
            # Refused: keep the last good files; not retried until settings change.
            self._files = dict(self._applied_files)
            return
        except ConfigError:
            # Tested good but not taken (a listener could not bind, no answer in
            # time): try again later, the cause may pass.
            delay = min(RELOAD_RETRY_BASE * 2**self._reload_failures, RELOAD_RETRY_MAX)
            self._reload_failures += 1
            asyncio.get_running_loop().call_later(delay, self._queue.add, RESYNC)
            log.warning("nginx reload is retried", extra={"fields": {"retry_in": delay}})
            return
        self._reload_failures = 0
        for p, t in changes.items():
            if t is None:
                self._applied_files.pop(p, None)
            else:
                self._applied_files[p] = t

    # ---- the worker ----------------------------------------------------------------

    def _sync_logged(self, ref: ObjectRef) -> None:
        started = time.monotonic()
        try:
            self.sync(ref)
        except Exception as e:
            if ref.kind in ("Ingress", "VirtualServer"):
                # A retry would fail the same way: rejected until it changes.
                log.exception("sync failed", extra={"fields": {"key": str(ref)}})
                self._reject(ref, _internal(e))
            else:
                delay = self._queue.retry(ref)
                log.exception("sync failed", extra={"fields": {"key": str(ref), "retry_in": delay}})
        else:
            self._queue.forget(ref)
        seconds = time.monotonic() - started
        self._metrics.work_seconds.observe(seconds)
        self._generation_seconds += seconds

    async def drain(self) -> None:
        """Start-up: sync everything queued, then apply it with one flush."""
        while len(self._queue):
            self._sync_logged(await self._queue.get())
        await self.flush()

    async def run(self) -> None:
        window = self._settings.batch_window
        while True:
            self._sync_logged(await self._queue.get())
            deadline = time.monotonic() + self._settings.batch_max_delay
            while len(self._queue) or (
                time.monotonic() < deadline and await self._queue.wait_for_item(window)
            ):
                self._sync_logged(await self._queue.get())
            await self.flush()


def _internal(e: Exception) -> str:
    return f"internal error ({type(e).__name__}: {e}); please report it"


def _vs_class(obj: Mapping[str, Any]) -> str:
    """The class a raw VirtualServer asks for ("" for none)."""
    spec = obj.get("spec")
    value = spec.get("ingressClassName") if isinstance(spec, Mapping) else None
    return value if isinstance(value, str) else ""


def _same(a: VirtualServer, b: VirtualServer) -> bool:
    """Equal but for resourceVersion (a status write changes only that)."""
    return a == replace(b, meta=replace(b.meta, resource_version=a.meta.resource_version))
