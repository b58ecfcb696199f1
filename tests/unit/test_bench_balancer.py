"""bench/balancer.py: a replica leaves the rotation after three failed probes and
returns after one good one, as kubelet keeps a pod in its Service; the proxy
forwards only to replicas in the rotation."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from aiohttp import web
from bench.balancer import Balancer, Probe, Replica

from testkit.harness import free_port


class Switchable:
    """A /nginx-ready answering 200 or 503 as told, in a thread of its own, and an
    echo port standing for the replica's webhook."""

    def __init__(self) -> None:
        self.ready = True
        self.ready_port, self.echo_port = free_port(), free_port()
        self._loop = asyncio.new_event_loop()
        self._up = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()
        assert self._up.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def answer(request: web.Request) -> web.Response:
            return web.Response(status=200 if self.ready else 503)

        async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(f"{self.echo_port}:".encode() + await reader.readline())
            await writer.drain()
            writer.close()

        async def start() -> None:
            app = web.Application()
            app.router.add_get("/nginx-ready", answer)
            runner = web.AppRunner(app)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", self.ready_port).start()
            await asyncio.start_server(echo, "127.0.0.1", self.echo_port)

        self._loop.run_until_complete(start())
        self._up.set()
        self._loop.run_forever()


def _until(condition: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not met"
        time.sleep(0.01)


@pytest.fixture
def two() -> Iterator[tuple[Switchable, Switchable, Balancer]]:
    a, b = Switchable(), Switchable()
    balancer = Balancer(
        [Replica("a", a.ready_port, a.echo_port), Replica("b", b.ready_port, b.echo_port)],
        Probe(period=0.05, timeout=0.5, failures=3),
        proxy_port=free_port(),
    )
    balancer.start()
    yield a, b, balancer
    balancer.stop()


def _names(balancer: Balancer) -> set[str]:
    return {r.name for r in balancer.ready()}


def _through_proxy(balancer: Balancer) -> bytes:
    assert balancer.proxy_port is not None
    with socket.create_connection(("127.0.0.1", balancer.proxy_port), timeout=5) as s:
        s.sendall(b"hello\n")
        try:
            return s.recv(100)
        except ConnectionResetError:  # closed with the line unread
            return b""


def test_a_replica_leaves_after_three_failed_probes_and_returns_after_one_good(
    two: tuple[Switchable, Switchable, Balancer],
) -> None:
    a, b, balancer = two
    _until(lambda: _names(balancer) == {"a", "b"})
    a.ready = False
    left = time.monotonic()
    _until(lambda: _names(balancer) == {"b"})
    # Three probes 0.05 s apart: not at the first failed one.
    assert time.monotonic() - left >= 0.1
    assert {_through_proxy(balancer) for _ in range(6)} == {f"{b.echo_port}:hello\n".encode()}
    a.ready = True
    _until(lambda: _names(balancer) == {"a", "b"})
    answers = {_through_proxy(balancer) for _ in range(6)}
    assert answers == {f"{p}:hello\n".encode() for p in (a.echo_port, b.echo_port)}


def test_with_no_replica_ready_the_proxy_closes_the_connection(
    two: tuple[Switchable, Switchable, Balancer],
) -> None:
    a, b, balancer = two
    _until(lambda: _names(balancer) == {"a", "b"})
    a.ready = b.ready = False
    _until(lambda: _names(balancer) == set())
    assert _through_proxy(balancer) == b""
    assert balancer.proxy_refused >= 1
