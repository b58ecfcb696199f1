"""The machine deletion controller: watch Machines, walk each deletion in order.

One worker takes Machine keys from a deduplicating queue (every watch event
queues its Machine's key), reads the Machine afresh and does the next step of
``lifecycle.next_step``; a step that changed the Machine queues it again, so
the next step sees what the last one wrote. Waiting for hooks needs no timer:
their owners' updates are watch events.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import time
from collections.abc import Mapping
from typing import Any

from ferryman.engine.workqueue import WorkQueue
from ferryman.kube import client as kube
from ferryman.kube.errors import Conflict, NotFound
from ferryman.kube.resources import AsyncClient, Node, create_namespaced_resource
from ferryman.kube.watch import Backoff, Listing, Query, informer
from ferryman.machines import conditions, drain, lifecycle
from ferryman.machines.events import EventWriter
from ferryman.machines.hooks import go_list, hooks_of
from ferryman.machines.lifecycle import (
    DRAIN_BACKOFF,
    DRAIN_TIMEOUT,
    EVICTION_RETRY,
    INSTANCE_POLL,
    MAX_BACKOFF,
)
from ferryman.machines.provider import InstanceProvider

log = logging.getLogger("ferryman.machines")

Machine = create_namespaced_resource("machine.openshift.io", "v1beta1", "Machine", "machines")

Key = tuple[str, str]  # namespace, name


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class MachineReconciler:
    def __init__(
        self,
        client: AsyncClient,
        provider: InstanceProvider,
        events: EventWriter,
        *,
        namespace: str = "*",
        drain_timeout: float = DRAIN_TIMEOUT,
        drain_backoff: float = DRAIN_BACKOFF,
        eviction_retry: float = EVICTION_RETRY,
        instance_poll: float = INSTANCE_POLL,
    ) -> None:
        self._client = client
        self._provider = provider
        self._events = events
        self._namespace = namespace
        self._drain_timeout = drain_timeout
        self._drain_backoff = drain_backoff
        self._eviction_retry = eviction_retry
        self._instance_poll = instance_poll
        self._queue: WorkQueue[Key] = WorkQueue()
        self._drain_failures: dict[str, int] = {}  # Machine uid -> failed rounds
        # Machine uid -> when its next drain round may start: a failed round's own
        # status write comes back as a watch event, which must not start the next.
        self._next_round: dict[str, float] = {}
        self._blocked: dict[str, str] = {}  # Machine uid -> the pre-drain hooks last reported

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self._watch(), name="watch machines")
            tg.create_task(self._work(), name="reconcile machines")

    async def _watch(self) -> None:
        """List then watch from the list's version; on any end, again (a
        Machine missed meanwhile is listed, and reconciling twice is harmless)."""
        await informer(
            self._client,
            Query(Machine, namespace=self._namespace),
            self._event,
            _interrupted,
            Backoff(1.0, 1.0),
            on_list=self._listed,
        )

    async def _listed(self, listing: Listing) -> None:
        async for m in listing:
            self._queue.add(_key(_plain(m)))

    async def _event(self, _: str, m: Any) -> None:
        self._queue.add(_key(_plain(m)))

    async def _work(self) -> None:
        while True:
            key = await self._queue.get()
            try:
                again = await self.reconcile(key)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                delay = self._queue.retry(key)
                log.warning(
                    "reconcile failed",
                    extra={
                        "fields": {"machine": "/".join(key), "error": repr(e), "retry_in": delay}
                    },
                )
                continue
            self._queue.forget(key)
            if again == 0:
                self._queue.add(key)
            elif again is not None:
                asyncio.get_running_loop().call_later(again, self._queue.add, key)

    async def reconcile(self, key: Key) -> float | None:
        """One step for one Machine; returns when to look again (0: at once,
        None: on its next change)."""
        namespace, name = key
        try:
            machine = _plain(await kube.get(self._client, Machine, name, namespace=namespace))
        except NotFound:
            return None
        step = lifecycle.next_step(machine)
        log.debug("step", extra={"fields": {"machine": f"{namespace}/{name}", "step": step.value}})
        if step is lifecycle.Step.ADD_FINALIZER:
            # First, as the Machine API does: once its conditions show, a
            # deletion can no longer slip past the controller.
            finalizers = [*(machine["metadata"].get("finalizers") or []), lifecycle.FINALIZER]
            await self._patch(machine, {"metadata": {"finalizers": finalizers}})
            return 0
        status = lifecycle.status_patch(machine, _now())
        if status is not None:
            machine = await self._patch(machine, {"status": status}, status_subresource=True)
        if step is lifecycle.Step.DRAIN_BLOCKED:
            return await self._drain_blocked(machine)
        if step is lifecycle.Step.DRAIN_SKIPPED:
            await self._events.emit(machine, "DrainSkipped", "Node drain skipped")
            await self._set_drained(
                machine, conditions.true(conditions.DRAINED, "Node drain skipped")
            )
            return 0
        if step is lifecycle.Step.DRAIN:
            return await self._drain(machine)
        if step is lifecycle.Step.TERMINATE:
            return await self._terminate(machine)
        return None  # NOTHING, TERMINATE_BLOCKED: the hook owners' updates wake us

    async def _drain_blocked(self, machine: Mapping[str, Any]) -> float | None:
        uid = machine["metadata"]["uid"]
        blocking = go_list(hooks_of(machine).pre_drain)
        if self._blocked.get(uid) != blocking:  # once per set of hooks, not per update
            self._blocked[uid] = blocking
            await self._events.emit(machine, "DrainBlocked", "Drain blocked by pre-drain hook")
        return None

    async def _drain(self, machine: dict[str, Any]) -> float:
        uid = machine["metadata"]["uid"]
        node = lifecycle.node_name(machine)
        assert node is not None
        wait = self._next_round.get(uid, 0.0) - time.monotonic()
        if wait > 0:
            return wait
        await self._events.emit(machine, "DrainProceeds", "Node drain proceeds")
        try:
            drained = await drain.drain(
                self._client, node, self._drain_timeout, self._eviction_retry
            )
        except drain.DrainError as e:
            failures = self._drain_failures.get(uid, 0)
            self._drain_failures[uid] = failures + 1
            await self._set_drained(machine, conditions.drain_failed(str(e)))
            await self._events.emit(machine, "DrainRequeued", f"Node drain requeued: {e}")
            delay = float(min(self._drain_backoff * 2**failures, MAX_BACKOFF))
            self._next_round[uid] = time.monotonic() + delay
            return delay
        self._forget(uid)
        if drained:
            await self._events.emit(machine, "Deleted", f'Node "{node}" drained')
        await self._events.emit(machine, "DrainSucceeded", "Node drain succeeded")
        await self._set_drained(
            machine, conditions.true(conditions.DRAINED, "Drain finished successfully")
        )
        return 0

    async def _terminate(self, machine: dict[str, Any]) -> float | None:
        await self._provider.delete(machine)
        if await self._provider.exists(machine):
            return self._instance_poll
        if node := lifecycle.node_name(machine):
            with contextlib.suppress(NotFound):
                await kube.delete(self._client, Node, node)
        finalizers = [
            f for f in machine["metadata"].get("finalizers") or [] if f != lifecycle.FINALIZER
        ]
        await self._patch(machine, {"metadata": {"finalizers": finalizers}})
        self._forget(machine["metadata"]["uid"])
        self._blocked.pop(machine["metadata"]["uid"], None)
        log.info(
            "machine deletion successful", extra={"fields": {"machine": "/".join(_key(machine))}}
        )
        return None

    def _forget(self, uid: str) -> None:
        self._drain_failures.pop(uid, None)
        self._next_round.pop(uid, None)

    async def _set_drained(self, machine: dict[str, Any], condition: conditions.Condition) -> None:
        """Writes the drain's outcome against the Machine as it is now: a hook
        owner releasing its hook during the round changed it (409), and failing
        the reconcile for that would drain a drained Node again."""
        for attempt in range(5):
            current = (machine.get("status") or {}).get("conditions") or []
            merged = conditions.merged(current, [condition], _now())
            try:
                await self._patch(
                    machine, {"status": {"conditions": merged}}, status_subresource=True
                )
                return
            except Conflict:
                if attempt == 4:
                    raise
            md = machine["metadata"]
            machine = _plain(
                await kube.get(self._client, Machine, md["name"], namespace=md["namespace"])
            )

    async def _patch(
        self, machine: Mapping[str, Any], body: dict[str, Any], *, status_subresource: bool = False
    ) -> dict[str, Any]:
        """A merge patch that holds only against the version read: a Machine
        changed meanwhile fails with 409, and the worker reads it again."""
        md = machine["metadata"]
        body = {
            **body,
            "metadata": {**body.get("metadata", {}), "resourceVersion": md["resourceVersion"]},
        }
        res = Machine.Status if status_subresource else Machine
        patched = await kube.patch(self._client, res, md["name"], body, namespace=md["namespace"])
        return _plain(patched)


def _interrupted(e: Exception) -> None:
    log.warning("machine watch interrupted", extra={"fields": {"error": str(e)}})


def _plain(obj: Any) -> dict[str, Any]:
    data: dict[str, Any] = obj.to_dict()
    return data


def _key(machine: Mapping[str, Any]) -> Key:
    md = machine.get("metadata") or {}
    return (str(md.get("namespace", "")), str(md.get("name", "")))
