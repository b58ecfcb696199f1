"""HTTP endpoints for operators: ``/nginx-ready``, ``/healthz`` and ``/metrics``.

``/healthz`` (the liveness probe) answers 200 whenever the controller's event loop
does, ready or not: a pod starting, draining or whose NGINX is behind is alive, and
restarting it would only lose what it has built.

Served by asyncio's streams with h11 framing the messages (as
dataplane/unix_http.py does NGINX's): three GET paths, one answer per
connection, which kubelets and Prometheus both take. aiohttp's server did
this before, and importing aiohttp is ~130 ms of every start (issue 31)."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from http import HTTPStatus

import h11

from ferryman.observability.metrics import Metrics

log = logging.getLogger("ferryman.probes")

# (status, body, Content-Type)
Answer = tuple[int, bytes, str]
Handler = Callable[[], Awaitable[Answer]]
_TEXT = "text/plain; charset=utf-8"
# A request's head must arrive within this (a kubelet's probe times out in 1 s
# by default): a client that never finishes one holds no connection for long.
_REQUEST_SECONDS = 10.0
_READ = 16 * 1024


class ProbeServer:
    def __init__(
        self,
        ready_port: int,
        metrics_port: int,
        metrics: Metrics,
        is_ready: Callable[[], bool],
        # The data plane's connection and request counters (stub_status's fields).
        counters: Callable[[], Awaitable[dict[str, int] | None]],
        # Requests in flight: (per peer, this replica, whether peers are measured).
        in_flight: Callable[[], Awaitable[tuple[Mapping[str, int], int, bool]]] | None = None,
        *,
        ipv6: bool = False,
    ) -> None:
        """``ipv6``: listen on ``[::]`` too (IPv6 only, beside IPv4's socket):
        kubelets probe, and Prometheus scrapes, the pod's address, IPv6 in an
        IPv6 cluster."""
        self._ports = (ready_port, metrics_port)
        self._hosts = ("0.0.0.0", "::") if ipv6 else ("0.0.0.0",)
        self._metrics = metrics
        self._is_ready = is_ready
        self._counters = counters
        self._in_flight = in_flight
        self._servers: list[asyncio.Server] = []

    async def _ready(self) -> Answer:
        if self._is_ready():
            return 200, b"Ready\n", _TEXT
        return 503, b"Service Unavailable\n", _TEXT

    async def _alive(self) -> Answer:
        return 200, b"OK\n", _TEXT

    async def _scrape(self) -> Answer:
        try:
            reading = await self._counters()
        except Exception:  # NGINX down or restarting: nginx_up says so
            reading = None
        self._metrics.stub_status.reading = reading
        flight = None
        if self._in_flight is not None:
            try:
                flight = await self._in_flight()
            except Exception:  # as above: no reading rather than a stale one
                flight = None
        self._metrics.in_flight.reading = flight
        return 200, self._metrics.exposition(), "text/plain; version=0.0.4; charset=utf-8"

    async def start(self) -> None:
        ready_port, metrics_port = self._ports
        routes = [(ready_port, "/nginx-ready", self._ready), (ready_port, "/healthz", self._alive)]
        if metrics_port:
            routes.append((metrics_port, "/metrics", self._scrape))
        by_port: dict[int, dict[str, Handler]] = {}
        for port, path, handler in routes:
            by_port.setdefault(port, {})[path] = handler
        for port, paths in by_port.items():
            serve = functools.partial(_serve, paths)
            for host in self._hosts:  # asyncio makes an IPv6 socket IPv6 only
                self._servers.append(await asyncio.start_server(serve, host, port))

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
        for server in self._servers:
            await server.wait_closed()


async def _serve(
    paths: Mapping[str, Handler], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    conn = h11.Connection(h11.SERVER)
    try:
        async with asyncio.timeout(_REQUEST_SECONDS):
            event = conn.next_event()
            while event is h11.NEED_DATA:
                conn.receive_data(await reader.read(_READ))
                event = conn.next_event()
        if not isinstance(event, h11.Request):
            return  # closed before asking
        answer = await _answer(paths, event)
        status, body, content_type = answer
        headers = [
            ("Content-Type", content_type),
            ("Content-Length", str(len(body))),
            ("Connection", "close"),
        ]
        reason = HTTPStatus(status).phrase.encode()
        response = h11.Response(status_code=status, headers=headers, reason=reason)
        writer.write(conn.send(response) or b"")
        if event.method != b"HEAD":
            writer.write(conn.send(h11.Data(data=body)) or b"")
        writer.write(conn.send(h11.EndOfMessage()) or b"")
        await writer.drain()
    except (h11.ProtocolError, OSError, TimeoutError):
        pass  # not HTTP, gone, or too slow: nothing to answer
    finally:
        writer.close()


async def _answer(paths: Mapping[str, Handler], request: h11.Request) -> Answer:
    handler = paths.get(request.target.decode("ascii", "replace").partition("?")[0])
    if handler is None:
        return 404, b"404: Not Found", _TEXT
    if request.method not in (b"GET", b"HEAD"):
        return 405, b"405: Method Not Allowed", _TEXT
    try:
        return await handler()
    except Exception:
        log.exception("probe handler failed", extra={"fields": {"path": request.target.decode()}})
        return 500, b"500 Internal Server Error\n", _TEXT
