"""app/lifecycle.py: everything stops in STOP_ORDER: the workers, then NGINX,
then the replica's report Lease (the leader must not hear "stopped" while
NGINX serves), then DNS, the webhook socket and the probes."""

from __future__ import annotations

import asyncio
import logging

import pytest

from ferryman.app.lifecycle import REPLICA_REPORT, STOP_ORDER, Lifecycle


def test_everything_stops_in_the_declared_order() -> None:
    events: list[str] = []

    async def until_cancelled(name: str) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            events.append(f"cancelled {name}")
            raise

    def step(name: str):  # type: ignore[no-untyped-def]
        async def stop() -> None:
            events.append(f"stopped {name}")

        return stop

    async def scenario() -> None:
        life = Lifecycle()
        for name in ("probes", "dns", "nginx"):  # registered in any order
            life.on_stop(name, step(name))
        life.run(REPLICA_REPORT, until_cancelled(REPLICA_REPORT))
        life.run("controller", until_cancelled("controller"))
        life.adopt([asyncio.create_task(until_cancelled("informers"), name="informers")])
        await asyncio.sleep(0)
        await life.stop()

    asyncio.run(scenario())
    assert sorted(events[:2]) == ["cancelled controller", "cancelled informers"]
    assert events[2:] == [
        "stopped nginx", f"cancelled {REPLICA_REPORT}", "stopped dns", "stopped probes",
    ]  # fmt: skip
    assert STOP_ORDER.index("nginx") < STOP_ORDER.index(REPLICA_REPORT)


def test_a_worker_that_ignores_its_cancellation_is_named_and_left_behind(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A worker stuck in a call (here: one that swallows its cancellation and
    waits on) is logged with where it waits, then abandoned: NGINX still gets
    its graceful stop, where the old stop waited for the worker forever."""
    stopped: list[str] = []
    release = asyncio.Event()

    async def stuck_in_a_call() -> None:
        await release.wait()

    async def stubborn() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await stuck_in_a_call()

    async def nginx_stop() -> None:
        stopped.append("nginx")

    async def scenario() -> None:
        life = Lifecycle(slow_after=0.01, abandon_after=0.05)
        life.on_stop("nginx", nginx_stop)
        worker = life.run("stubborn", stubborn())
        await asyncio.sleep(0)
        await life.stop()
        assert not worker.done() and life.abandoned == [worker]
        release.set()
        await worker

    with caplog.at_level(logging.WARNING, logger="ferryman.lifecycle"):
        asyncio.run(scenario())
    assert stopped == ["nginx"]
    said = [(r.getMessage(), r.fields) for r in caplog.records]  # type: ignore[attr-defined]
    assert [m for m, _ in said] == ["stop step slow", "stop step abandoned"]
    fields = said[1][1]
    assert fields["step"] == "workers" and fields["task"] == "stubborn"
    assert fields["waiting_in"].startswith("stubborn (")
    assert " > stuck_in_a_call (" in fields["waiting_in"]


def test_a_failing_stop_step_is_logged_and_the_later_steps_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stopped: list[str] = []

    async def nginx_stop() -> None:
        raise OSError("no such process")

    async def probes_stop() -> None:
        stopped.append("probes")

    async def scenario() -> None:
        life = Lifecycle()
        life.on_stop("nginx", nginx_stop)
        life.on_stop("probes", probes_stop)
        await life.stop()

    with caplog.at_level(logging.ERROR, logger="ferryman.lifecycle"):
        asyncio.run(scenario())
    assert stopped == ["probes"]
    assert [r.getMessage() for r in caplog.records] == ["stop step failed"]
