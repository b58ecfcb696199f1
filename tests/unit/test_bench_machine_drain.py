"""bench/machine_drain.py's own parts: the load balancer that follows readiness,
the deletion's timeline and phases, the hook's hold from its Events, the table."""

from __future__ import annotations

import asyncio
import json
import time

from aiohttp import web
from bench.machine_drain import (
    Balancer,
    Timeline,
    _client,
    health_checks,
    hook_hold,
    result_name,
    summary,
    table,
)
from bench.rollout import Tally
from hypothesis import given
from hypothesis import strategies as st

from testkit.harness import free_port


@given(st.lists(st.booleans(), min_size=1, max_size=5), st.integers(0, 1000))
def test_the_balancer_sends_to_ready_replicas_only_each_in_turn(
    ready: list[bool], start: int
) -> None:
    balancer = Balancer(ready)
    up = [i for i, ok in enumerate(ready) if ok]
    chosen = [balancer.choose(n) for n in range(start, start + len(up))]
    if not up:
        assert chosen == [] and balancer.choose(start) is None
    else:
        assert sorted(c for c in chosen if c is not None) == up  # each ready one once


class _Replica:
    """An aiohttp server standing in for a ferryman replica: readiness and answers."""

    def __init__(self, pod: str) -> None:
        self.pod, self.ready, self.port = pod, True, free_port()
        self.answered: list[float] = []

    async def start(self) -> web.AppRunner:
        async def ready(request: web.Request) -> web.Response:
            return web.Response(status=200 if self.ready else 503)

        async def answer(request: web.Request) -> web.Response:
            self.answered.append(time.monotonic())
            return web.Response(text=json.dumps({"name": self.pod}))

        app = web.Application()
        app.router.add_get("/nginx-ready", ready)
        app.router.add_get("/{tail:.*}", answer)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.port).start()
        return runner


def test_the_load_leaves_a_replica_at_the_first_health_check_that_finds_it_unready() -> None:
    interval = 0.1

    async def scenario() -> tuple[Tally, list[_Replica], float, list[tuple[float, int, bool]]]:
        replicas = [_Replica("web-a"), _Replica("web-b")]
        runners = [await r.start() for r in replicas]
        ports = [r.port for r in replicas]
        tally, stop, changes = Tally(), asyncio.Event(), []
        balancer = Balancer([True, True])
        tasks = [
            asyncio.create_task(health_checks(ports, balancer, interval, stop, changes)),
            *(
                asyncio.create_task(_client(i, 2, ports, balancer, 0.02, tally, stop, 0))
                for i in range(2)
            ),
        ]
        await asyncio.sleep(0.5)
        replicas[1].ready = False
        flipped = time.monotonic()
        await asyncio.sleep(0.8)
        stop.set()
        await asyncio.gather(*tasks)
        for runner in runners:
            await runner.cleanup()
        return tally, replicas, flipped, changes

    tally, replicas, flipped, changes = asyncio.run(scenario())
    assert tally.failure_kinds() == {}
    assert tally.served_by["web-a"] > 20 and tally.served_by["web-b"] > 10
    # Requests went to both before; to the unready one only until a check saw it.
    assert any(t < flipped for t in replicas[1].answered)
    (change,) = changes
    assert change[1:] == (1, False) and flipped <= change[0] <= flipped + interval + 0.5
    assert max(replicas[1].answered) <= change[0] + 0.2  # one sent before it
    assert max(replicas[0].answered) > flipped + 0.5


def test_no_ready_replica_is_a_failed_request() -> None:
    async def scenario() -> Tally:
        tally, stop = Tally(), asyncio.Event()
        task = asyncio.create_task(
            _client(0, 1, [free_port()], Balancer([False]), 0.02, tally, stop, 0)
        )
        await asyncio.sleep(0.2)
        stop.set()
        await task
        return tally

    tally = asyncio.run(scenario())
    assert set(tally.failure_kinds()) == {"no_ready_replica"}
    assert tally.failure_kinds()["no_ready_replica"] >= 5


def test_phases_follow_the_deletion_and_never_go_back() -> None:
    tally = Tally()
    timeline = Timeline(tally)
    timeline.mark("deleted", now=100.0)
    assert tally.phase == "hooks" and timeline.marks == {"deleted": 0.0}
    timeline.mark("replica_sigterm", now=101.0)  # not a phase of its own
    assert tally.phase == "hooks"
    timeline.mark("drained", now=104.5)  # the cordon went unseen between two polls
    assert tally.phase == "terminate"
    timeline.mark("cordoned", now=104.6)
    assert tally.phase == "terminate"
    assert not timeline.mark("drained", now=110.0)  # the first sight counts
    timeline.mark("machine_gone", now=107.25)
    assert tally.phase == "after"
    assert timeline.marks == {
        "deleted": 0.0, "replica_sigterm": 1.0, "drained": 4.5, "cordoned": 4.6,
        "machine_gone": 7.25,
    }  # fmt: skip
    assert timeline.since(102.5) == 2.5 and timeline.since(None) is None


def test_the_hook_held_the_drain_until_the_event_that_says_it_went() -> None:
    events = [
        ("IngressTrafficDraining", 0.4),
        ("DrainBlocked", 0.5),
        ("IngressTrafficDrained", 3.25),
        ("DrainProceeds", 3.3),
        ("IngressReplicaStopped", 9.0),
    ]
    assert hook_hold(events) == {
        "held_s": 3.25, "result": "drained", "draining_event_s": 0.4, "between_events_s": 2.85,
    }  # fmt: skip
    timed_out = [("IngressTrafficDraining", 0.2), ("IngressTrafficDrainTimedOut", 60.1)]
    assert hook_hold(timed_out) == {
        "held_s": 60.1, "result": "timed out", "draining_event_s": 0.2, "between_events_s": 59.9,
    }  # fmt: skip
    assert hook_hold([("DrainProceeds", 0.1), ("DrainSucceeded", 2.0)]) is None
    assert hook_hold([("IngressTrafficDraining", 0.3)])["result"] == "never released"  # type: ignore[index]


def test_results_are_named_for_the_mode_and_a_term_delay_other_than_the_default() -> None:
    assert result_name(True, 2.0) == "machine-drain-hook.json"
    assert result_name(False, 2.0) == "machine-drain-no-hook.json"
    assert result_name(False, 0.0) == "machine-drain-no-hook-term0s.json"
    assert result_name(True, 0.5) == "machine-drain-hook-term0.5s.json"
    assert result_name(True, 0.0, 0.5) == "machine-drain-hook-term0s-req0.5s.json"
    assert result_name(True, 2.0, 0, "machine") == "machine-drain-hook-leader-on-machine.json"


def test_the_summary_and_the_table_say_what_failed_and_when() -> None:
    tally = Tally()
    timeline = Timeline(tally)
    for _ in range(10):
        tally.ok("web-1", 0)
    timeline.mark("deleted", now=50.0)
    tally.ok("web-1", 1)
    timeline.mark("cordoned", now=51.0)
    tally.failed("timeout", sent=51.5, replica=0)
    tally.failed("connection_refused", sent=51.6, replica=1)
    timeline.mark("machine_gone", now=58.0)
    s = summary(tally, timeline)
    assert s["requests"] == 13 and s["failed"] == 2
    assert s["requests_by_phase"] == {"before": 10, "hooks": 1, "drain": 2}
    assert s["failed_by_phase"] == {"drain": {"connection_refused": 1, "timeout": 1}}
    assert s["deletion_s"] == 8.0
    assert [f["sent_s"] for f in s["failures"]] == [1.5, 1.6]
    result = {
        **s,
        "mode": "no-hook",
        "pods": {"term_delay_s": 0.0},
        "hook": None,
        "last_answer_s": {"machine_pods": 1.2, "machine_replica": 0.9},
        "ferryman": {"leader": "ferryman-shared"},
        "nginx_upstream_errors": {},
    }
    lines = dict(line.split("  ", 1) for line in table(result).splitlines())
    assert lines["failed"].strip() == "2  (connection_refused 1, timeout 1)"
    assert lines["failed by phase"].strip() == "drain 2"
    assert lines["Machine deleted in s"].strip() == "8.0"
    assert lines["hook held the drain"].strip() == "-"
    assert lines["steps, s after deletion"].strip() == "cordoned 1.0  machine_gone 8.0"
