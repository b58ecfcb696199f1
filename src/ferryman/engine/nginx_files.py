"""The configuration files NGINX runs, and the one test + reload that changes them.

Records change by push and never reload; files (ferryman's own settings, the
listeners, stream.conf, what ``--nginx-configmaps`` renders) change only by a
reload. This module keeps that second path apart from the worker: the files
wanted and the files live, the reload with its retry when NGINX tested them
good but did not take them, and the ConfigMap whose keys become files and
whose Event waits for the reload's outcome.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from ferryman.configs.configmap import ConfigMapState
from ferryman.dataplane import DataPlane
from ferryman.dataplane.errors import (
    DROPPED,
    GIVE_UP,
    RETRY,
    ConfigError,
    ConfigTestError,
    ReloadError,
)
from ferryman.engine.queue_keys import RESYNC, QueueKey
from ferryman.engine.store import Store
from ferryman.engine.workqueue import WorkQueue
from ferryman.report import Reporter
from ferryman.resources.meta import ObjectRef

log = logging.getLogger("ferryman.controller")

# A reload that tested good but was not taken is tried again after this many
# seconds, doubling per failure up to the maximum.
RELOAD_RETRY_BASE = 1.0
RELOAD_RETRY_MAX = 30.0


class NginxFiles:
    def __init__(
        self,
        files: Mapping[str, str],
        dataplane: DataPlane,
        queue: WorkQueue[QueueKey],
        reporter: Reporter,
        store: Store,
        configmap: ConfigMapState | None,
    ) -> None:
        """``files``: the configuration files NGINX was started with;
        ``configmap``: the keys of ``--nginx-configmaps`` and the files they render."""
        # Desired and applied files (path -> text). Translators write the
        # desired ones in place (they hold this dict).
        self.desired: dict[str, str] = dict(files)
        self._applied: dict[str, str] = dict(files)
        self._dataplane = dataplane
        self._queue = queue
        self._reporter = reporter
        self._store = store  # the ConfigMap is read from it
        self._configmap = configmap
        self._configmap_changed = False  # its Event waits for the reload's outcome
        self._reload_failures = 0  # unconfirmed reloads in a row (for the retry's backoff)
        self._retry_error = ""  # why the reload to be retried failed
        self._configmap_waiting = False  # its Warning for that said
        # NGINX could not bind these ports (port -> reason): what to do
        # (dataplane/errors.py: DROPPED, RETRY or GIVE_UP).
        self.on_unbindable: Callable[[Mapping[int, str]], str] = lambda ports: RETRY

    def applied(self, path: str) -> str | None:
        """The text of ``path`` the data plane runs."""
        return self._applied.get(path)

    def changes(self) -> dict[str, str | None]:
        """The files that differ from those the data plane runs."""
        return {p: t for p, t in self.desired.items() if self._applied.get(p) != t}

    def route_defaults(self) -> Mapping[str, str]:
        """The ConfigMap's route-level keys in force (NIC's names, normalised): the
        defaults ``nginx.org/*`` annotations override ({} without a ConfigMap)."""
        return self._configmap.route_defaults() if self._configmap is not None else {}

    def sync_configmap(self, ref: ObjectRef) -> bool:
        """``--nginx-configmaps``: its keys become nginx.conf (configs/configmap.py).
        True when its route-level defaults moved (every route renders again)."""
        cm = self._configmap
        if cm is None or not cm.watches(ref.namespace, ref.name):
            return False
        before = cm.route_defaults()
        obj = self._store.get("ConfigMap", ref.namespace, ref.name)
        for event in cm.update(obj, (ref.namespace, ref.name)):
            self._reporter.event(ref, *event)
        self.desired.update(cm.files())
        self._configmap_changed = True
        return cm.route_defaults() != before

    def status_addresses(self) -> tuple[str, ...] | None:
        """The ConfigMap's ``external-status-address`` (None: unset, or no ConfigMap)."""
        return None if self._configmap is None else self._configmap.status_addresses()

    async def apply(self, changes: Mapping[str, str | None]) -> None:
        """Apply ``changes`` (from ``changes()``) with one test + reload, then
        report how the ConfigMap's update went."""
        error = await self._reload(changes) if changes else None
        if self._configmap_changed and self._configmap is not None:
            self._configmap_applied(self._configmap, error)

    def _configmap_applied(self, cm: ConfigMapState, error: str | None) -> None:
        """Report how the ConfigMap's update went (``error``: ``nginx -t``'s refusal,
        "" while a reload is still to be retried); after a refusal its last good
        values are rendered again (at start-up, the defaults: the listeners open)."""
        ref = ObjectRef("ConfigMap", *cm.last)
        if error == "":
            if not self._configmap_waiting:
                self._configmap_waiting = True
                self._reporter.event(ref, *cm.waiting(self._retry_error))
            return
        self._configmap_changed = False
        self._configmap_waiting = False
        self._reporter.event(ref, *cm.reloaded(error))
        # After the update's own Event: until this replica leads, the last Event
        # of each object is the one kept.
        for event in cm.ingress_nginx_notes():
            assert cm.ingress_nginx is not None
            self._reporter.event(ObjectRef("ConfigMap", *cm.ingress_nginx), *event)
        if error is not None:
            retry = cm.files()
            if any(self.desired.get(p) != t for p, t in retry.items()):
                self.desired.update(retry)
                self._queue.add(RESYNC)

    async def _reload(self, changes: Mapping[str, str | None]) -> str | None:
        """Apply changed files; the data plane counts and logs the reload. Returns
        why ``nginx -t`` refused them, "" when the reload is retried later, None
        when they are live."""
        try:
            await self._dataplane.apply(changes)
        except ConfigTestError as e:
            return self._refused(str(e) or "nginx -t failed")
        except ReloadError as e:
            if e.ports:
                # A port NGINX cannot bind: the same files would fail for ever.
                # Refused to whoever asked for it, and the reload goes on at once.
                self._retry_error = str(e)
                outcome = self.on_unbindable(e.ports)
                if outcome == DROPPED:
                    self._queue.add(RESYNC)
                    return ""
                if outcome == GIVE_UP:
                    return self._refused(str(e))
            return self._retry(e)
        except ConfigError as e:
            return self._retry(e)
        self._reload_failures = 0
        self._retry_error = ""
        for p, t in changes.items():
            if t is None:
                self._applied.pop(p, None)
            else:
                self._applied[p] = t
        return None

    def _refused(self, error: str) -> str:
        """Keep the last good files; not retried until settings change. In
        place: translators (TransportServers' stream.conf) hold the dict."""
        self.desired.clear()
        self.desired.update(self._applied)
        return error

    def _retry(self, e: ConfigError) -> str:
        """Tested good but not taken (no answer in time): try again later, the
        cause may pass."""
        delay = min(RELOAD_RETRY_BASE * 2**self._reload_failures, RELOAD_RETRY_MAX)
        self._reload_failures += 1
        self._retry_error = str(e)
        asyncio.get_running_loop().call_later(delay, self._queue.add, RESYNC)
        log.warning("nginx reload is retried", extra={"fields": {"retry_in": delay}})
        return ""
