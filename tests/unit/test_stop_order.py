"""app/lifecycle.py: everything stops in STOP_ORDER: the workers, then NGINX,
then the replica's report Lease (the leader must not hear "stopped" while
NGINX serves), then DNS, the webhook socket and the probes."""

from __future__ import annotations

import asyncio

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
