"""Whether this replica follows the API closely enough to take traffic.

Ready means caught up (issue 32). A replica whose event loop stood still (a
SIGSTOP, a long GC pause, a frozen node) or that lost the API server for longer
than it is trusted has not followed what happened meanwhile: pods deleted, new
ones added. Its NGINX serves on with what it last applied, but ``/nginx-ready``
answers 503 from the first moment the replica can tell (the probe runs on the
same event loop, so a probe that waited through the stall is answered after
the check) until every informer has listed again and NGINX has confirmed what
the lists changed.

How long it is trusted is the report Lease's duration (``--leader-election-
lease-duration``, the duration the readiness gates count a replica for):

- the event loop: a gap of more than a third of it, the report's renewal
  interval. A replica that missed a renewal may be counted no longer by the
  time it notices (its last renewal was up to a third before the stall began),
  so "no longer counted by the gates" implies "not ready" whatever the phase.
- the API server and NGINX: some informer has been unable to list, or pushes
  to NGINX have failed, for the whole duration (as long as the report Lease
  goes without renewal before the gates stop counting the replica).

Pure but for the clock and the task it starts: ``app`` wires the source's
``resync`` and the wait for the relist to be applied.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

log = logging.getLogger("ferryman.following")


class Following:
    """``ready()`` is False from a stall or an API outage until caught up."""

    def __init__(
        self,
        trust: float,
        resync: Callable[[], None],
        caught_up: Callable[[], Awaitable[None]],
        failing: Sequence[tuple[str, Callable[[], float | None]]] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``resync``: make every informer list again; ``caught_up``: returns once
        they have and NGINX holds the result; ``failing``: (what, since when
        (``clock``'s time) it has failed, None while it works)."""
        self.trust = trust
        self.max_gap = trust / 3
        self._resync = resync
        self._caught_up = caught_up
        self._failing = failing
        self._clock = clock
        self._beat = clock()
        self._catching: asyncio.Task[None] | None = None
        self.behind = False

    def ready(self) -> bool:
        """Checks first: the probe may be the first thing to run after a stall."""
        self.check()
        return not self.behind

    def check(self) -> None:
        now = self._clock()
        gap, self._beat = now - self._beat, now
        if gap > self.max_gap:
            self.fell_behind(f"the event loop stood still for {gap:.1f} s")
            return
        for what, failing_since in self._failing:
            since = failing_since()
            if since is not None and now - since > self.trust and not self.behind:
                self.fell_behind(f"{what} failed for {now - since:.1f} s")

    def fell_behind(self, why: str) -> None:
        """Not ready until every informer has listed again and NGINX applied it
        (a catch-up under way starts over: what it read may predate the stall)."""
        log.warning("behind the API; not ready until caught up", extra={"fields": {"why": why}})
        self.behind = True
        if self._catching is not None:
            self._catching.cancel()
        self._resync()
        self._catching = asyncio.get_running_loop().create_task(self._catch_up(), name="catch up")

    async def _catch_up(self) -> None:
        await self._caught_up()
        self.behind = False
        self._catching = None
        log.info("caught up with the API; ready")

    async def run(self) -> None:
        """Beats often enough to see a gap of ``max_gap``."""
        try:
            while True:
                self.check()
                await asyncio.sleep(min(1.0, self.max_gap / 4))
        finally:
            if self._catching is not None:
                self._catching.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._catching
