"""The one list+watch loop: every watcher of the API (the informers of
``sources/kubernetes.py``, the drain agent's and the machine controller's
Machines, the webhook's Secret and configuration) runs ``informer``.

A round lists (the list's resourceVersion is where its watch starts), then
watches. lightkube re-makes a watch the server closed (after
``WATCH_SECONDS``) from the last version seen; an error, a 410 ``Gone`` after
compaction among them, ends the round: the next lists again, after a backoff
that doubles up to its cap and starts over after each list that succeeds.
A watcher without a list (``list_first=False``) watches from the current
state: the API server starts such a watch with every object as ADDED.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from lightkube import AsyncClient

from ferryman.kube.errors import mapped

# The server ends a watch after this many seconds (lightkube makes it again).
WATCH_SECONDS = 300


@dataclass(frozen=True)
class Query:
    """What to list and watch: ``namespace`` "*" every one, None cluster-scoped."""

    resource: Any
    namespace: str | None = None
    fields: Mapping[str, str] | None = None
    labels: Mapping[str, str] | None = None
    chunk_size: int | None = None  # objects per list request (limit/continue)

    def selectors(self) -> dict[str, Any]:
        kw: dict[str, Any] = {}
        if self.namespace is not None:
            kw["namespace"] = self.namespace
        if self.fields:
            kw["fields"] = dict(self.fields)
        if self.labels:
            kw["labels"] = dict(self.labels)
        return kw


@dataclass(frozen=True)
class Backoff:
    """Seconds between rounds after an error: ``first``, doubling up to ``most``."""

    first: float
    most: float

    def after(self, delay: float) -> float:
        return min(delay * 2, self.most)


class Listing:
    """One list's objects, in pages; ``version`` once they have all come."""

    def __init__(self, client: AsyncClient, query: Query) -> None:
        self._list = client.list(query.resource, chunk_size=query.chunk_size, **query.selectors())

    async def __aiter__(self) -> AsyncIterator[Any]:
        with mapped():
            async for obj in self._list:
                yield obj

    @property
    def version(self) -> str:
        return str(self._list.resourceVersion)


async def events(
    client: AsyncClient, query: Query, version: str | None
) -> AsyncIterator[tuple[str, Any]]:
    """The watch's (type, object) pairs from ``version`` (None: the current state)."""
    with mapped():
        async for event, obj in client.watch(
            query.resource, resource_version=version, server_timeout=WATCH_SECONDS,
            **query.selectors(),
        ):  # fmt: skip
            yield event, obj


OnList = Callable[[Listing], Awaitable[None]]
OnEvent = Callable[[str, Any], Awaitable[None]]


async def informer(
    client: AsyncClient,
    query: Query,
    on_event: OnEvent,
    on_error: Callable[[Exception], float | None],
    backoff: Backoff,
    *,
    on_list: OnList | None = None,
    pause: Callable[[float], Awaitable[object]] = asyncio.sleep,
    pause_after_end: bool = False,
    stop: asyncio.Event | None = None,
    restart: Callable[[], asyncio.Event] | None = None,
) -> None:
    """List (``on_list`` takes every object) and watch (``on_event``), round
    after round, until ``stop``; ``on_error`` is told why a round ended (and
    may answer the next wait, seconds). ``on_list`` None: watch only, and the
    backoff starts over at each event instead.

    ``pause``: how to wait between rounds (a watcher woken sooner by other
    events); ``pause_after_end``: wait after a watch that ended without an
    error too; ``restart``: the event (asked anew each round) that ends the
    round's watch, and the next round starts at once."""
    delay = backoff.first

    async def deliver(event: str, obj: Any) -> None:
        nonlocal delay
        await on_event(event, obj)
        if on_list is None:
            delay = backoff.first

    while stop is None or not stop.is_set():
        again = restart() if restart is not None else None
        try:
            version: str | None = None
            if on_list is not None:
                listing = Listing(client, query)
                await on_list(listing)
                version = listing.version
                delay = backoff.first
            watching = _watch(client, query, version, deliver)
            if again is None:
                await watching
            else:
                await _until(again, watching)
            if not pause_after_end and not (again is not None and again.is_set()):
                continue
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a watcher outlives any API or network failure
            if (wait := on_error(e)) is not None:
                delay = wait
        if again is not None and again.is_set():
            continue
        await pause(delay)
        delay = backoff.after(delay)


async def _watch(client: AsyncClient, query: Query, version: str | None, on_event: OnEvent) -> None:
    async for event, obj in events(client, query, version):
        await on_event(event, obj)


async def _until(event: asyncio.Event, work: Awaitable[object]) -> None:
    """``work`` until it ends (raising what it raised) or ``event`` is set."""
    task = asyncio.ensure_future(work)
    asked = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({task, asked}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in (task, asked):
            t.cancel()
        await asyncio.gather(task, asked, return_exceptions=True)
    if not task.cancelled() and (error := task.exception()) is not None:
        raise error
