"""following.Following: when a replica counts as behind the API, and when it
is caught up again (a clock of the test's own; the catch-up is an Event)."""

from __future__ import annotations

import asyncio

from ferryman.engine.following import Following

TRUST = 30.0  # the report Lease's duration


class World:
    def __init__(self) -> None:
        self.now = 1000.0
        self.resyncs = 0
        self.applied = asyncio.Event()
        self.failing_since: float | None = None
        self.pushes_failing: float | None = None

    def resync(self) -> None:
        self.resyncs += 1
        self.applied = asyncio.Event()

    async def caught_up(self) -> None:
        await self.applied.wait()

    def following(self) -> Following:
        return Following(
            TRUST,
            self.resync,
            self.caught_up,
            (("lists", lambda: self.failing_since), ("pushes", lambda: self.pushes_failing)),
            lambda: self.now,
        )


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_gap_up_to_a_renewal_interval_keeps_it_ready() -> None:
    async def run() -> None:
        w = World()
        f = w.following()
        for _ in range(10):
            w.now += TRUST / 3
            assert f.ready()
        assert w.resyncs == 0

    asyncio.run(run())


def test_a_stall_past_a_renewal_interval_holds_readiness_until_caught_up() -> None:
    async def run() -> None:
        w = World()
        f = w.following()
        w.now += TRUST / 3 + 0.1  # SIGSTOP: the Lease may expire before it is renewed
        assert not f.ready()
        assert w.resyncs == 1
        w.now += 1
        assert not f.ready()  # listed, not yet applied
        w.applied.set()
        await _settle()
        assert f.ready()
        assert w.resyncs == 1

    asyncio.run(run())


def test_a_second_stall_while_catching_up_starts_over() -> None:
    async def run() -> None:
        w = World()
        f = w.following()
        w.now += TRUST
        assert not f.ready()
        first = w.applied
        w.now += TRUST
        assert not f.ready()
        first.set()  # what the first relist read predates the second stall
        await _settle()
        assert not f.ready()
        w.applied.set()
        await _settle()
        assert f.ready() and w.resyncs == 2

    asyncio.run(run())


def test_an_api_outage_is_trusted_for_the_lease_duration() -> None:
    async def run() -> None:
        w = World()
        f = w.following()
        w.failing_since = w.now
        for _ in range(3):
            w.now += TRUST / 3
            assert f.ready()  # as long as the gates count it
        w.now += 0.5
        assert not f.ready()
        for _ in range(5):  # still down: one resync, retried by the informers
            w.now += 1
            assert not f.ready()
        assert w.resyncs == 1
        w.failing_since = None
        w.applied.set()
        await _settle()
        assert f.ready()

    asyncio.run(run())


def test_pushes_failing_for_the_lease_duration_hold_readiness_until_one_succeeds() -> None:
    async def run() -> None:
        w = World()
        f = w.following()
        w.pushes_failing = w.now
        w.now += TRUST / 3
        assert f.ready()
        w.now += TRUST / 3
        assert f.ready()
        w.now += TRUST / 3 + 0.5
        assert not f.ready()
        w.pushes_failing = None
        w.applied.set()  # relisted, and a push took it
        await _settle()
        assert f.ready() and w.resyncs == 1

    asyncio.run(run())
