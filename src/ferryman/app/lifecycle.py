"""The process's named tasks and the order everything stops in, declared once
(``STOP_ORDER``).

Why this order: the workers (sources, controller, webhook, ...) stop first, so
nothing changes NGINX while it stops; NGINX stops next, having served through
the grace period; the replica's report Lease is withdrawn only then, because
withdrawing it tells the leader this replica stopped serving (a Machine's
pre-terminate hook waits for that); the Angie flavour's DNS server, the
webhook's socket and the probes go last (a probe that answers until the end
says "not ready", never "gone").
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

# The replica report Lease's task (Kubernetes mode), stopped after NGINX.
REPLICA_REPORT = "replica-report"
WORKERS = "workers"
STOP_ORDER = (WORKERS, "nginx", REPLICA_REPORT, "dns", "webhook socket", "probes")


class Lifecycle:
    def __init__(self) -> None:
        self.tasks: list[asyncio.Task[Any]] = []
        self._stops: dict[str, Callable[[], Awaitable[None]]] = {}

    def run(self, name: str, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Runs ``work`` as task ``name`` until the process stops."""
        task = asyncio.create_task(work, name=name)
        self.tasks.append(task)
        return task

    def adopt(self, tasks: list[asyncio.Task[Any]]) -> None:
        """Tasks made elsewhere (Kubernetes mode's), stopped as these are."""
        self.tasks += tasks

    def on_stop(self, step: str, stop: Callable[[], Awaitable[None]]) -> None:
        """What stopping ``step`` (one of ``STOP_ORDER``) takes."""
        assert step in STOP_ORDER and step not in (WORKERS, REPLICA_REPORT), step
        self._stops[step] = stop

    async def stop(self) -> None:
        """Everything, in ``STOP_ORDER``."""
        report = [t for t in self.tasks if t.get_name() == REPLICA_REPORT]
        tasks = {WORKERS: [t for t in self.tasks if t not in report], REPLICA_REPORT: report}
        for step in STOP_ORDER:
            if step in tasks:
                for t in tasks[step]:
                    t.cancel()
                await asyncio.gather(*tasks[step], return_exceptions=True)
            elif (stop := self._stops.get(step)) is not None:
                await stop()
