"""bench/rollout.py's accounting: what its load clients count as failed, and how."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from collections import Counter

import pytest
from aiohttp import web
from bench import rollout
from bench.rollout import Tally, alternating, load, summary

from testkit.harness import free_port


async def _serve(handler: web.Handler) -> tuple[web.AppRunner, int]:
    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, port


async def _resetting() -> tuple[asyncio.Server, int]:
    """Reads a request, then resets the connection (SO_LINGER 0): a process that died."""

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    port = free_port()
    return await asyncio.start_server(on_connect, "127.0.0.1", port), port


async def _load(ports: list[int], tally: Tally, requests: int = 24) -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(
        load(ports, alternating(len(ports)), clients=2, rate=40, tally=tally, stop=stop)
    )
    while sum(tally.requests.values()) < requests:  # noqa: ASYNC110 (a counter, no event)
        await asyncio.sleep(0.05)
    stop.set()
    await task


def test_each_non_200_and_each_connection_error_is_a_failure_of_its_kind() -> None:
    async def scenario() -> Tally:
        async def pod(request: web.Request) -> web.Response:
            return web.Response(text=json.dumps({"name": "web-1", "path": request.path}))

        async def bad_gateway(request: web.Request) -> web.Response:
            return web.Response(status=502)

        good, good_port = await _serve(pod)
        bad, bad_port = await _serve(bad_gateway)
        resetting, reset_port = await _resetting()
        refused = free_port()  # nothing listens there
        tally = Tally(phase="rollout 1")
        try:
            await _load([good_port, bad_port, reset_port, refused], tally)
        finally:
            await good.cleanup()
            await bad.cleanup()
            resetting.close()
        return tally

    tally = asyncio.run(scenario())
    kinds = tally.failure_kinds()
    assert set(kinds) == {"502", "connection_reset", "connection_refused"}, kinds
    assert tally.served_by.keys() == {"web-1"}
    # Clients take the four targets in turn: about a quarter each.
    total = tally.requests["rollout 1"]
    assert total >= 24
    for n in (*kinds.values(), tally.served_by["web-1"]):
        assert total / 4 - 2 <= n <= total / 4 + 2


def test_the_summary_counts_failures_by_kind_and_rollout_and_times_rollouts() -> None:
    tally = Tally()
    for phase, ok, failed in (
        ("before", 10, []),
        ("rollout 1", 50, ["502", "502", "connection_refused"]),
        ("rollout 2", 50, []),
        ("after", 10, ["503"]),
    ):
        tally.phase = phase
        for _ in range(ok):
            tally.ok("web-1")
        for kind in failed:
            tally.failed(kind)
    rollouts = [
        {"complete_s": 10.0, "old_pods_gone_s": 11.0},
        {"complete_s": 14.0, "old_pods_gone_s": 14.5},
        {"complete_s": 12.0, "old_pods_gone_s": 12.0},
    ]
    s = summary(tally, rollouts)
    assert s["requests"] == 124
    assert s["failed"] == 4
    assert s["failed_by_kind"] == {"502": 2, "503": 1, "connection_refused": 1}
    assert s["failed_by_phase"] == {"after": 1, "rollout 1": 3}
    assert s["rollout_s"] == {"p50": 12.0, "max": 14.0, "total": 36.0}
    assert s["old_pods_gone_s"] == {"p50": 12.0, "max": 14.5}
    assert Counter(tally.served_by) == {"web-1": 120}


def test_gates_need_a_ferryman_that_knows_the_gates_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rollout, "GATES_FLAG", "--no-such-flag")
    with pytest.raises(SystemExit, match="`ferryman run` has no --no-such-flag option"):
        rollout.check_gates_flag()
    monkeypatch.setattr(rollout, "GATES_FLAG", "--shutdown-grace-period")
    rollout.check_gates_flag()


def test_requests_a_waiting_client_did_not_send_are_counted() -> None:
    async def scenario() -> Tally:
        async def slow(request: web.Request) -> web.Response:
            await asyncio.sleep(0.5)
            return web.Response(text=json.dumps({"name": "web-1"}))

        runner, port = await _serve(slow)
        tally = Tally()
        try:
            await _load([port], tally, requests=4)
        finally:
            await runner.cleanup()
        return tally

    tally = asyncio.run(scenario())
    # 2 clients, 40 requests/s in all: each was due every 0.05 s, and waited 0.5 s.
    assert tally.failure_kinds() == Counter()
    assert tally.not_sent >= 4 * 8
    assert tally.slow == 0  # late, but not hanging


def test_a_flag_is_known_only_by_its_whole_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rollout, "GATES_FLAG", "--shutdown-grace")  # a prefix of a real one
    with pytest.raises(SystemExit):
        rollout.check_gates_flag()
