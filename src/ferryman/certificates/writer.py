"""Writes the Certificates VirtualServers ask for (--enable-cert-manager), when
this replica leads: after each change, and every 30 s (someone may have edited
or deleted one). Each write is reported on the VirtualServer with NIC's Event
reasons."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from ferryman.certificates.decide import (
    BAD_CONFIG,
    CREATED,
    DELETED,
    UPDATED,
    Action,
    plan,
)
from ferryman.certificates.wanted import Asked
from ferryman.kube import client as kube
from ferryman.kube.errors import KubeError, NotFound
from ferryman.kube.resources import AsyncClient, create_namespaced_resource
from ferryman.report import Reporter
from ferryman.resources.meta import ObjectRef

log = logging.getLogger("ferryman.certificates")

Certificate = create_namespaced_resource("cert-manager.io", "v1", "Certificate", "certificates")
RESYNC_SECONDS = 30.0


class CertificateWriter:
    def __init__(
        self,
        client: AsyncClient,
        asked: Asked,
        is_leader: Callable[[], bool],
        reporter: Reporter,
        namespaces: tuple[str, ...],
    ) -> None:
        self._client = client
        self._asked = asked
        self._is_leader = is_leader
        self._reporter = reporter
        self._namespaces = namespaces or ("",)  # "": every namespace
        self._kick = asyncio.Event()
        self._foreign_said: set[tuple[str, str]] = set()
        self._missing_said = False
        asked.changed = self.kick

    def kick(self) -> None:
        self._kick.set()

    async def run(self) -> None:
        """Sync after each change once this replica leads (asked every second
        while a change waits), and every RESYNC_SECONDS."""
        loop = asyncio.get_running_loop()
        pending, last = True, loop.time()
        while True:
            timeout = 1.0 if pending else RESYNC_SECONDS
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kick.wait(), timeout)
            if self._kick.is_set():
                self._kick.clear()
                pending = True
            if not self._is_leader():
                continue
            if pending or loop.time() - last >= RESYNC_SECONDS:
                pending, last = False, loop.time()
                await self.sync()

    async def sync(self) -> None:
        try:
            existing = [c for ns in self._namespaces for c in await self._list(ns)]
        except NotFound:
            if not self._missing_said:
                self._missing_said = True
                log.warning("cert-manager's Certificate resource is not served (CRDs missing?)")
            return
        except Exception as e:  # API unreachable: the next round tries again
            log.warning("listing Certificates failed", extra={"fields": {"error": str(e)}})
            return
        self._missing_said = False
        for action in plan(self._asked.wanted(), existing, self._asked.served()):
            await self._write(action)

    async def _list(self, namespace: str) -> list[dict[str, Any]]:
        found = kube.items(self._client, Certificate, namespace=namespace or None)
        return [c.to_dict() async for c in found]  # type: ignore[no-untyped-call]

    async def _write(self, a: Action) -> None:
        vs = ObjectRef("VirtualServer", a.namespace, a.vs)
        if a.verb == "foreign":
            if (a.namespace, a.name) not in self._foreign_said:
                self._foreign_said.add((a.namespace, a.name))
                self._reporter.event(
                    vs,
                    "Warning",
                    BAD_CONFIG,
                    f"Certificate {a.name!r} exists and is not controlled by this "
                    "VirtualServer: left as it is",
                )
            return
        self._foreign_said.discard((a.namespace, a.name))
        try:
            if a.verb == "delete":
                await kube.delete(self._client, Certificate, a.name, namespace=a.namespace)
                self._reporter.event(
                    vs, "Normal", DELETED, f"Successfully deleted unrequired Certificate {a.name!r}"
                )
                return
            assert a.body is not None
            body = Certificate.from_dict(dict(a.body))
            await self._client.apply(body, field_manager="ferryman", force=True)
            reason, done = (CREATED, "created") if a.verb == "create" else (UPDATED, "updated")
            self._reporter.event(
                vs, "Normal", reason, f"Successfully {done} Certificate {a.name!r}"
            )
        except NotFound:
            pass  # gone meanwhile (a delete), or its namespace: the next round sees
        except (KubeError, Exception) as e:
            self._reporter.event(
                vs,
                "Warning",
                BAD_CONFIG,
                f"Error writing Certificate {a.name!r} for VirtualServer resource: {e}",
            )
