"""What sits in front of ferryman replicas in a cluster, for benchmarks: a view
of which replicas are ready, kept the way kubelet's readiness probe keeps a
pod in its Service, and a TCP proxy that sends each connection to a ready one.

Clients that pick a replica from ``Balancer.ready()`` follow readiness as an
external load balancer targeting the pods does; the proxy is the Service the
API server calls the readiness gate webhook through (kube-proxy forwards only
to ready endpoints). deploy/ probes ``/nginx-ready`` every second with
kubelet's defaults for the rest (1 s timeout, out after 3 failures, in after
1 success): ``Probe``'s defaults.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import aiohttp


@dataclass(frozen=True)
class Probe:
    period: float = 1.0
    timeout: float = 1.0
    failures: int = 3  # consecutive failures that take a replica out


@dataclass(frozen=True)
class Replica:
    name: str
    ready_port: int
    webhook_port: int | None = None


class Balancer:
    """Probes every replica's ``/nginx-ready`` in a thread of its own (its own
    event loop, so a busy benchmark loop does not delay probes) and, with
    ``proxy_port``, forwards TCP connections there to a ready replica's webhook."""

    def __init__(
        self, replicas: Sequence[Replica], probe: Probe = Probe(), proxy_port: int | None = None
    ) -> None:
        self.replicas, self.probe, self.proxy_port = list(replicas), probe, proxy_port
        self._ready: tuple[Replica, ...] = ()  # replaced whole: readers need no lock
        self._failures = {r.name: 0 for r in self.replicas}
        self._turn = itertools.count()
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.proxied = 0
        self.proxy_refused = 0  # connections with no ready replica to go to

    def ready(self) -> tuple[Replica, ...]:
        return self._ready

    def start(self) -> None:
        self._thread.start()
        self._started.wait(10)

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(10)

    def _run(self) -> None:
        self._loop.run_until_complete(self._serve())
        self._loop.close()

    async def _serve(self) -> None:
        self._stopping = asyncio.Event()
        server = None
        if self.proxy_port is not None:
            server = await asyncio.start_server(self._forward, "127.0.0.1", self.proxy_port)
        asyncio.create_task(self._probe_forever())  # noqa: RUF006 (cancelled at stop)
        self._started.set()
        await self._stopping.wait()
        if server is not None:
            server.close()
        # The probes and every connection still piped end with the loop.
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    async def _probe_forever(self) -> None:
        timeout = aiohttp.ClientTimeout(total=self.probe.timeout)
        # A new connection each probe, as kubelet's httpGet makes.
        async with aiohttp.ClientSession(
            timeout=timeout, connector=aiohttp.TCPConnector(force_close=True)
        ) as session:
            while True:
                results = await asyncio.gather(*(self._ok(session, r) for r in self.replicas))
                for replica, ok in zip(self.replicas, results, strict=True):
                    self._failures[replica.name] = 0 if ok else self._failures[replica.name] + 1
                self._ready = tuple(
                    r
                    for r, ok in zip(self.replicas, results, strict=True)
                    if ok or (r in self._ready and self._failures[r.name] < self.probe.failures)
                )
                await asyncio.sleep(self.probe.period)

    @staticmethod
    async def _ok(session: aiohttp.ClientSession, replica: Replica) -> bool:
        url = f"http://127.0.0.1:{replica.ready_port}/nginx-ready"
        try:
            async with session.get(url) as r:
                return r.status == 200
        except (TimeoutError, aiohttp.ClientError):
            return False

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        targets = [r for r in self._ready if r.webhook_port is not None]
        if not targets:
            self.proxy_refused += 1
            writer.close()
            return
        target = targets[next(self._turn) % len(targets)]
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target.webhook_port)
        except OSError:
            self.proxy_refused += 1
            writer.close()
            return
        self.proxied += 1
        # Cancelled at stop: asyncio's stream server logs a callback task that
        # ends cancelled as an error, so the cancellation ends here.
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(ConnectionError, OSError):
            writer.close()
