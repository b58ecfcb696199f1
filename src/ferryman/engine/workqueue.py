"""A deduplicating queue of keys for exactly one worker, with rate-limited retries.

As in client-go's workqueue: a key queued twice before it is taken is handled
once; a key that failed comes back after an exponentially growing delay.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")

# client-go's default per-item backoff: 5 ms doubling up to 1000 s is too slow
# to recover for a data plane; cap at 30 s.
BASE_DELAY = 0.005
MAX_DELAY = 30.0


class WorkQueue(Generic[K]):
    def __init__(
        self,
        on_depth: Callable[[int], None] | None = None,
        on_wait: Callable[[float], None] | None = None,
    ) -> None:
        self._items: deque[K] = deque()
        self._queued: set[K] = set()
        self._failures: dict[K, int] = {}
        self._nonempty = asyncio.Event()
        self._on_depth = on_depth or (lambda _: None)
        self._on_wait = on_wait or (lambda _: None)
        self._added: dict[K, float] = {}

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: K) -> bool:
        """Whether ``key`` waits to be taken."""
        return key in self._queued

    def add(self, key: K) -> None:
        if key in self._queued:
            return
        self._queued.add(key)
        self._added[key] = time.monotonic()
        self._items.append(key)
        self._nonempty.set()
        self._on_depth(len(self._items))

    async def get(self) -> K:
        while not self._items:
            self._nonempty.clear()
            await self._nonempty.wait()
        key = self._items.popleft()
        self._queued.discard(key)
        self._on_wait(time.monotonic() - self._added.pop(key))
        self._on_depth(len(self._items))
        return key

    async def wait_for_item(self, timeout: float) -> bool:
        """True when an item is (or becomes) available within ``timeout``."""
        if self._items:
            return True
        self._nonempty.clear()
        try:
            await asyncio.wait_for(self._nonempty.wait(), timeout)
        except TimeoutError:
            return False
        return True

    def retry(self, key: K) -> float:
        """Queue ``key`` again after its backoff; returns the delay chosen."""
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        delay: float = min(BASE_DELAY * (2.0**n), MAX_DELAY)
        asyncio.get_running_loop().call_later(delay, self.add, key)
        return delay

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)
