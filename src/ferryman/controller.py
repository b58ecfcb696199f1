"""The one worker: sync a key from the store into the desired state, then make
NGINX match it.

``sync`` turns one queued key into changes of the desired files and endpoint
sets (no I/O beyond the secret store's files). ``flush`` pushes endpoint sets
(never a reload), then applies changed files with one test + reload, isolating
any file NGINX refuses, and finally reports Events. ``run`` batches: while the
queue holds items, or new ones arrive within ``batch_window``, no flush happens.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from ferryman.configs.endpoints import port_ref_of, resolve_peers
from ferryman.configs.ingress import SecretState, secret_names, servers_for
from ferryman.configs.model import BackendKey, Location
from ferryman.configs.render import Renderer
from ferryman.configuration import Configuration
from ferryman.dataplane import DataPlane
from ferryman.dataplane.errors import ConfigError, EndpointsPushError
from ferryman.metrics import Metrics
from ferryman.report import (
    ADDED_OR_UPDATED,
    ADDED_OR_UPDATED_WITH_ERROR,
    ADDED_OR_UPDATED_WITH_WARNING,
    NORMAL,
    REJECTED,
    WARNING,
    Reporter,
)
from ferryman.resources.ingress import parse_ingress
from ferryman.resources.ingressclass import (
    CONTROLLER_NAME,
    ClassPolicy,
    parse_ingress_class,
    raw_class_name,
)
from ferryman.resources.meta import InvalidResource, ObjectRef
from ferryman.resources.service import (
    SERVICE_NAME_LABEL,
    parse_endpoint_slice,
    parse_service,
)
from ferryman.secrets import SecretStore
from ferryman.settings import Settings
from ferryman.store import Store
from ferryman.workqueue import WorkQueue

log = logging.getLogger("ferryman.controller")

DEFAULT_LOCATIONS = "default-locations.conf"
NOT_FOUND = (Location(False, "/", None),)
_MAX_ISOLATION_ROUNDS = 5


def ingress_file(ref: ObjectRef) -> str:
    # Namespaces are DNS labels and names DNS subdomains: neither contains "_".
    return f"conf.d/{ref.namespace}_{ref.name}.conf"


def _file_owner(path: str) -> ObjectRef | None:
    if path.startswith("conf.d/") and path.endswith(".conf"):
        ns, _, name = path[len("conf.d/") : -len(".conf")].partition("_")
        return ObjectRef("Ingress", ns, name)
    return None


def keys_for_event(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[ObjectRef]:
    """Map a stored object (and its previous version) to the keys to sync."""
    kind = str(obj.get("kind"))
    md = obj.get("metadata") or {}
    ns, name = str(md.get("namespace") or ""), str(md.get("name") or "")
    if kind == "EndpointSlice":
        keys = []
        for o in (obj, old):
            svc = ((o or {}).get("metadata") or {}).get("labels", {}).get(SERVICE_NAME_LABEL)
            if svc:
                keys.append(ObjectRef("Service", ns, str(svc)))
        return keys
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
        renderer: Renderer,
    ) -> None:
        self._settings = settings
        self._store = store
        self._queue = queue
        self._dataplane = dataplane
        self._secrets = secrets
        self._reporter = reporter
        self._metrics = metrics
        self._renderer = renderer
        self._config = Configuration()
        self._policy = ClassPolicy(settings.ingress_class, None)
        # Desired and applied state: files (path -> text), endpoint sets (key -> peers).
        self._files: dict[str, str] = {DEFAULT_LOCATIONS: self._not_found_locations()}
        self._applied_files: dict[str, str] = dict(self._files)
        self._peers: dict[BackendKey, str] = {}
        self._applied_peers: dict[BackendKey, str] = {}
        self._backends: dict[ObjectRef, frozenset[BackendKey]] = {}
        self._backend_users: dict[BackendKey, set[ObjectRef]] = {}
        self._service_backends: dict[tuple[str, str], set[BackendKey]] = {}
        self._secret_users: dict[tuple[str, str], set[ObjectRef]] = {}
        self._secret_states: dict[tuple[str, str], SecretState] = {}
        self._ref_secrets: dict[ObjectRef, set[str]] = {}
        self._pending: dict[ObjectRef, tuple[str, str, str]] = {}
        self.flushes = 0

    @property
    def files(self) -> Mapping[str, str]:
        return self._files

    # ---- sync: one key -> desired state -------------------------------------------

    def sync(self, ref: ObjectRef) -> None:
        if ref.kind == "Ingress":
            self._sync_ingress(ref)
        elif ref.kind == "IngressClass":
            self._sync_class(ref)
        elif ref.kind == "Service":
            for key in self._service_backends.get((ref.namespace, ref.name), ()):
                self._compute_peers(key)
        elif ref.kind == "Secret":
            self._sync_secret(ref)

    def _event(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        self._pending[ref] = (type_, reason, message)

    def _sync_ingress(self, ref: ObjectRef) -> None:
        obj = self._store.get("Ingress", ref.namespace, ref.name)
        ing = None
        if obj is not None and self._policy.accepts(raw_class_name(obj)):
            try:
                ing = parse_ingress(obj)
            except InvalidResource as e:
                self._event(ref, WARNING, REJECTED, f"{ref.namespace}/{ref.name} was rejected: {e}")
        affected = self._config.upsert(ing) if ing else self._config.delete(ref)
        for a in sorted(affected):
            self._render(a)
        if self._config.owner("") is None:
            self._files[DEFAULT_LOCATIONS] = self._not_found_locations()

    def _not_found_locations(self) -> str:
        return self._renderer.default_locations("no Ingress", NOT_FOUND)

    def _render(self, ref: ObjectRef) -> None:
        ing = self._config.get(ref)
        path = ingress_file(ref)
        if ing is None:
            self._files.pop(path, None)
            self._set_backends(ref, frozenset())
            self._set_secret_users(ref, set())
            return
        owned = self._config.owned_hosts(ref)
        lost = self._config.lost_hosts(ref)
        names = secret_names(ing)
        self._set_secret_users(ref, names)
        states = {n: self._secret_state(ref.namespace, n) for n in names}
        servers, warnings = servers_for(ing, owned, states)
        named = [s for s in servers if s.host]
        if named:
            self._files[path] = self._renderer.servers(str(ref), named)
        else:
            self._files.pop(path, None)
        for s in servers:
            if not s.host:
                self._files[DEFAULT_LOCATIONS] = self._renderer.default_locations(
                    str(ref), s.locations
                )
        self._set_backends(
            ref,
            frozenset(loc.backend for s in servers for loc in s.locations if loc.backend),
        )
        taken = [
            f"host {h or '(any host)'} is taken by {o.namespace}/{o.name}"
            for h, o in sorted(lost.items())
        ]
        who = f"{ref.namespace}/{ref.name}"
        if not owned:
            self._event(
                ref,
                WARNING,
                REJECTED,
                f"All hosts are taken by other resources: {'; '.join(taken)}",
            )
        elif taken or warnings:
            self._event(
                ref,
                WARNING,
                ADDED_OR_UPDATED_WITH_WARNING,
                f"Configuration for {who} was added or updated with warning(s): "
                + "; ".join(taken + warnings),
            )
        else:
            self._event(
                ref, NORMAL, ADDED_OR_UPDATED, f"Configuration for {who} was added or updated"
            )

    def _sync_class(self, ref: ObjectRef) -> None:
        if ref.name != self._settings.ingress_class:
            return
        obj = self._store.get("IngressClass", "", ref.name)
        cls = parse_ingress_class(obj) if obj is not None else None
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

    def _secret_state(self, namespace: str, name: str) -> SecretState:
        key = (namespace, name)
        state = self._secret_states.get(key)
        if state is None:
            state = self._secrets.update(namespace, name, self._store.get("Secret", *key))
            self._secret_states[key] = state
        return state

    def _set_secret_users(self, ref: ObjectRef, names: set[str]) -> None:
        old = self._ref_secrets.pop(ref, set())
        if names:
            self._ref_secrets[ref] = names
        for n in old - names:
            users = self._secret_users.get((ref.namespace, n), set())
            users.discard(ref)
            if not users:
                self._secret_users.pop((ref.namespace, n), None)
                self._secret_states.pop((ref.namespace, n), None)
        for n in names - old:
            self._secret_users.setdefault((ref.namespace, n), set()).add(ref)

    def _sync_secret(self, ref: ObjectRef) -> None:
        key = (ref.namespace, ref.name)
        self._secret_states.pop(key, None)
        for user in sorted(self._secret_users.get(key, ())):
            self._render(user)

    # ---- endpoints -----------------------------------------------------------------

    def _set_backends(self, ref: ObjectRef, backends: frozenset[BackendKey]) -> None:
        old = self._backends.get(ref, frozenset())
        if backends:
            self._backends[ref] = backends
        else:
            self._backends.pop(ref, None)
        for key in backends - old:
            users = self._backend_users.setdefault(key, set())
            if not users:
                ns, svc = self._split(key)[:2]
                self._service_backends.setdefault((ns, svc), set()).add(key)
                self._compute_peers(key)
            users.add(ref)
        for key in old - backends:
            users = self._backend_users.get(key, set())
            users.discard(ref)
            if not users:
                self._backend_users.pop(key, None)
                self._peers.pop(key, None)
                ns, svc = self._split(key)[:2]
                keys = self._service_backends.get((ns, svc), set())
                keys.discard(key)
                if not keys:
                    self._service_backends.pop((ns, svc), None)

    @staticmethod
    def _split(key: BackendKey) -> tuple[str, str, str]:
        ns, _, rest = key.partition("/")
        svc, _, port = rest.partition(":")
        return ns, svc, port

    def _compute_peers(self, key: BackendKey) -> None:
        ns, svc, port = self._split(key)
        raw = self._store.get("Service", ns, svc)
        service = parse_service(raw) if raw is not None else None
        slices = [parse_endpoint_slice(s) for s in self._store.slices_for(ns, svc)]
        peers = resolve_peers(service, slices, port_ref_of(port))
        self._peers[key] = " ".join(f"{p.address}#{p.port}" for p in peers)

    # ---- flush: desired -> NGINX ---------------------------------------------------

    def _file_changes(self) -> dict[str, str | None]:
        changes: dict[str, str | None] = {
            p: t for p, t in self._files.items() if self._applied_files.get(p) != t
        }
        changes.update({p: None for p in self._applied_files if p not in self._files})
        return changes

    async def flush(self) -> None:
        await self._push_endpoints()
        for _ in range(_MAX_ISOLATION_ROUNDS):
            changes = self._file_changes()
            if not changes:
                break
            try:
                seconds = await self._dataplane.apply(changes)
            except ConfigError as e:
                self._reload_failed(changes, e)
                continue
            self._reload_succeeded(changes, seconds)
        self._metrics.ingress_resources.labels(type="regular").set(len(self._config))
        pending, self._pending = self._pending, {}
        for ref, (type_, reason, message) in sorted(pending.items()):
            self._reporter.event(ref, type_, reason, message)
        self.flushes += 1

    async def _push_endpoints(self) -> None:
        changes = {k: v for k, v in self._peers.items() if self._applied_peers.get(k) != v}
        changes.update({k: "" for k in self._applied_peers if k not in self._peers})
        if not changes:
            return
        try:
            await self._dataplane.push_endpoints(changes, full=False)
        except EndpointsPushError:
            log.exception("endpoints push failed; retrying with the next change")
            return
        for k, v in changes.items():
            if v:
                self._applied_peers[k] = v
            else:
                self._applied_peers.pop(k, None)
        self._metrics.endpoint_pushes.inc()
        log.info(
            "endpoints updated without reload",
            extra={"fields": {"backends": len(changes), "keys": ",".join(sorted(changes)[:5])}},
        )

    def _reload_succeeded(self, changes: Mapping[str, str | None], seconds: float) -> None:
        for p, t in changes.items():
            if t is None:
                self._applied_files.pop(p, None)
            else:
                self._applied_files[p] = t
        self._metrics.reloads.labels(reason="other").inc()
        self._metrics.last_reload_status.set(1)
        self._metrics.last_reload_ms.set(round(seconds * 1000))
        self._metrics.reload_seconds.observe(seconds)
        self._secrets.collect_garbage()
        log.info(
            "nginx reloaded",
            extra={"fields": {"files": len(changes), "seconds": round(seconds, 3)}},
        )

    def _reload_failed(self, changes: Mapping[str, str | None], e: ConfigError) -> None:
        """Keep the last good files for whatever NGINX refused; report the culprits."""
        self._metrics.reload_errors.inc()
        self._metrics.last_reload_status.set(0)
        log.error("nginx refused the configuration", extra={"fields": {"error": str(e)}})
        culprits = [c for c in e.culprits if c in changes] or list(changes)
        for path in culprits:
            old = self._applied_files.get(path)
            if old is None:
                self._files.pop(path, None)
            else:
                self._files[path] = old
            owner = _file_owner(path) or self._config.owner("")
            if owner is not None:
                self._event(
                    owner,
                    WARNING,
                    ADDED_OR_UPDATED_WITH_ERROR,
                    f"Configuration for {owner.namespace}/{owner.name} was added or updated, "
                    f"but not applied: {e}",
                )

    # ---- the worker ----------------------------------------------------------------

    def _sync_logged(self, ref: ObjectRef) -> None:
        try:
            self.sync(ref)
        except Exception:
            delay = self._queue.retry(ref)
            log.exception("sync failed", extra={"fields": {"key": str(ref), "retry_in": delay}})
        else:
            self._queue.forget(ref)

    async def drain(self) -> None:
        """Start-up: sync everything queued, then apply it with one reload."""
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
