"""HTTP endpoints for operators: ``/nginx-ready``, ``/healthz`` and ``/metrics``.

``/healthz`` (the liveness probe) answers 200 whenever the controller's event loop
does, ready or not: a pod starting, draining or whose NGINX is behind is alive, and
restarting it would only lose what it has built."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from aiohttp import web

from ferryman.observability.metrics import Metrics


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
        self._runners: list[web.AppRunner] = []

    async def _ready(self, _: web.Request) -> web.Response:
        if self._is_ready():
            return web.Response(text="Ready\n")
        return web.Response(status=503, text="Service Unavailable\n")

    async def _alive(self, _: web.Request) -> web.Response:
        return web.Response(text="OK\n")

    async def _scrape(self, _: web.Request) -> web.Response:
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
        return web.Response(
            body=self._metrics.exposition(),
            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
        )

    async def start(self) -> None:
        ready_port, metrics_port = self._ports
        routes = [(ready_port, "/nginx-ready", self._ready), (ready_port, "/healthz", self._alive)]
        if metrics_port:
            routes.append((metrics_port, "/metrics", self._scrape))
        apps: dict[int, web.Application] = {}
        for port, path, handler in routes:
            apps.setdefault(port, web.Application()).router.add_get(path, handler)
        for port, app in apps.items():
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            self._runners.append(runner)
            for host in self._hosts:  # asyncio makes an IPv6 socket IPv6 only
                await web.TCPSite(runner, host, port).start()

    async def stop(self) -> None:
        for runner in self._runners:
            await runner.cleanup()
