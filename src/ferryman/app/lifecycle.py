"""The process's named tasks and the order everything stops in, declared once
(``STOP_ORDER``).

Why this order: the workers (sources, controller, webhook, ...) stop first, so
nothing changes NGINX while it stops; NGINX stops next, having served through
the grace period; the replica's report Lease is withdrawn only then, because
withdrawing it tells the leader this replica stopped serving (a Machine's
pre-terminate hook waits for that); the Angie flavour's DNS server, the
webhook's socket and the probes go last (a probe that answers until the end
says "not ready", never "gone").

A step that is slow is logged with where each of its tasks waits, and a
cancelled task that does not end within ``ABANDON_AFTER`` is left behind: a
worker stuck in a call must not keep NGINX from its graceful stop until the
kubelet's SIGKILL.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

log = logging.getLogger("ferryman.lifecycle")

# The replica report Lease's task (Kubernetes mode), stopped after NGINX.
REPLICA_REPORT = "replica-report"
WORKERS = "workers"
STOP_ORDER = (WORKERS, "nginx", REPLICA_REPORT, "dns", "webhook socket", "probes")
# Seconds: a step still running after SLOW_AFTER is logged with its tasks'
# stacks; cancelled tasks still running after ABANDON_AFTER are left behind.
# Every call ferryman makes while stopping (a Lease released, a report
# withdrawn) has the API client's 10 s timeout, so 15 s is never a healthy stop.
SLOW_AFTER = 5.0
ABANDON_AFTER = 15.0


class Lifecycle:
    def __init__(self, slow_after: float = SLOW_AFTER, abandon_after: float = ABANDON_AFTER):
        self.tasks: list[asyncio.Task[Any]] = []
        self._stops: dict[str, Callable[[], Awaitable[None]]] = {}
        self._slow_after = slow_after
        self._abandon_after = abandon_after
        # Cancelled tasks that did not end: asyncio.run, closing the loop,
        # would wait for them again.
        self.abandoned: list[asyncio.Task[Any]] = []

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
                # One that had ended already was logged then (app/root.py).
                running = [t for t in tasks[step] if not t.done()]
                for t in running:
                    t.cancel()
                await self._watched(step, running, self._abandon_after)
            elif (stop := self._stops.get(step)) is not None:
                # NGINX's stop bounds itself (its own timeout, then SIGKILL).
                await self._watched(step, [asyncio.create_task(_awaited(stop()), name=step)], None)

    async def _watched(
        self, step: str, tasks: list[asyncio.Task[Any]], limit: float | None
    ) -> None:
        """Until ``tasks`` end, or ``limit`` seconds; logs the slow ones."""
        if not tasks:
            return
        loop = asyncio.get_running_loop()
        start = loop.time()
        _, pending = await asyncio.wait(tasks, timeout=self._slow_after)
        if pending:
            _log_waiting("stop step slow", step, pending, loop.time() - start)
            rest = None if limit is None else max(0.0, limit - (loop.time() - start))
            _, pending = await asyncio.wait(pending, timeout=rest)
        if pending:
            _log_waiting("stop step abandoned", step, pending, loop.time() - start)
            self.abandoned += pending
        for t in tasks:
            if t.done() and not t.cancelled() and (e := t.exception()) is not None:
                fields = {"step": step, "task": t.get_name()}
                log.error("stop step failed", extra={"fields": fields}, exc_info=e)


async def _awaited(work: Awaitable[None]) -> None:
    await work


def _log_waiting(what: str, step: str, pending: set[asyncio.Task[Any]], seconds: float) -> None:
    for t in sorted(pending, key=lambda t: t.get_name()):
        log.warning(
            what,
            extra={
                "fields": {
                    "step": step,
                    "task": t.get_name(),
                    "seconds": round(seconds, 1),
                    "waiting_in": " > ".join(awaiting(t)),
                }
            },
        )


# A coroutine's, a generator's (``yield from``), an async generator's
# (``async for`` over a stream) frame and what it waits on.
_FRAMES = ("cr_frame", "gi_frame", "ag_frame")
_AWAITS = ("cr_await", "gi_yieldfrom", "ag_await")


def awaiting(task: asyncio.Task[Any]) -> list[str]:
    """Where ``task`` waits, outermost call first: ``Task.get_stack`` gives the
    outermost coroutine's frame alone, and the stuck call is the innermost."""
    where: list[str] = []
    step: Any = task.get_coro()
    while step is not None:
        frame = next((f for a in _FRAMES if (f := getattr(step, a, None)) is not None), None)
        if frame is None:
            if isinstance(step, asyncio.Future):
                where.append(_future(step))
            break
        where.append(f"{frame.f_code.co_name} ({frame.f_code.co_filename}:{frame.f_lineno})")
        step = next((w for a in _AWAITS if (w := getattr(step, a, None)) is not None), None)
    return where


def _future(future: asyncio.Future[Any]) -> str:
    if isinstance(future, asyncio.Task):
        return f"task {future.get_name()}: " + " > ".join(awaiting(future))
    return repr(future)[:200]
