"""ferryman's client of Angie's status API on the version socket: reload confirmation
through ``/status/angie/generation`` and the ``nginx_ingress_nginx_*`` metrics from
``/status/``. The server is a small aiohttp app on a unix socket serving the JSON
Angie documents (this tests our client, not Angie)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from ferryman.dataplane.angie import AngieGeneration, angie_counters, angie_in_flight
from ferryman.dataplane.errors import DataPlaneError, ReloadError
from ferryman.observability.metrics import Metrics, parse_angie_status

# The shape of Angie's /status/ (API docs, "Metrics"), trimmed to what is read.
STATUS: dict[str, Any] = {
    "angie": {"version": "1.11.3", "address": "127.0.0.1", "generation": 3},
    "connections": {"accepted": 2257, "dropped": 7, "active": 12, "idle": 5},
    "http": {
        "server_zones": {
            "ferryman": {
                "ssl": {"handshaked": 10, "reuses": 0, "timedout": 0, "failed": 0},
                "requests": {"total": 4080, "processing": 3, "discarded": 2},
                "responses": {"200": 4000, "404": 78},
                "data": {"received": 1000, "sent": 20000},
            },
            "other": {"requests": {"total": 20, "processing": 0, "discarded": 0}},
        },
        "location_zones": {},
        "upstreams": {},
    },
}


class FakeAngieApi:
    def __init__(self) -> None:
        self.generation: object = 1
        self.status: object = STATUS

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/status/angie/generation", self._generation)
        app.router.add_get("/status/", self._status)
        app.router.add_get("/status/http/", self._http)
        return app

    async def _http(self, _: web.Request) -> web.Response:
        assert isinstance(self.status, dict)
        return web.json_response(self.status["http"])

    async def _generation(self, _: web.Request) -> web.Response:
        return web.json_response(self.generation)

    async def _status(self, _: web.Request) -> web.Response:
        return web.json_response(self.status)


def serve(tmp_path: Path, api: FakeAngieApi, body: Callable[[Path], Awaitable[None]]) -> None:
    async def scenario() -> None:
        socket = tmp_path / "v.sock"
        runner = web.AppRunner(api.app())
        await runner.setup()
        await web.UnixSite(runner, str(socket)).start()
        try:
            await body(socket)
        finally:
            await runner.cleanup()

    asyncio.run(scenario())


def test_reload_is_confirmed_when_the_generation_moves_on(tmp_path: Path) -> None:
    api = FakeAngieApi()

    async def body(socket: Path) -> None:
        check = AngieGeneration(socket)
        before = await check.before()
        assert before == 1

        async def reload_later() -> None:
            await asyncio.sleep(0.1)
            api.generation = 2

        reload = asyncio.create_task(reload_later())
        await check.confirm(before, time.monotonic() + 5)
        await reload

    serve(tmp_path, api, body)


def test_a_generation_that_does_not_move_is_a_reload_error(tmp_path: Path) -> None:
    api = FakeAngieApi()

    async def body(socket: Path) -> None:
        check = AngieGeneration(socket)
        started = time.monotonic()
        with pytest.raises(ReloadError, match="did not move on from 1"):
            await check.confirm(await check.before(), time.monotonic() + 0.3)
        assert time.monotonic() - started < 2

    serve(tmp_path, api, body)


@pytest.mark.parametrize("value", ["2", None, True, {"generation": 2}])
def test_a_generation_that_is_not_a_number_is_a_reload_error(tmp_path: Path, value: object) -> None:
    api = FakeAngieApi()
    api.generation = value

    async def body(socket: Path) -> None:
        with pytest.raises(ReloadError, match="not a number"):
            await AngieGeneration(socket).before()

    serve(tmp_path, api, body)


def test_no_api_is_a_reload_error(tmp_path: Path) -> None:
    with pytest.raises(ReloadError):
        asyncio.run(AngieGeneration(tmp_path / "missing.sock").before())


def test_status_maps_to_stub_status_numbers() -> None:
    assert parse_angie_status(STATUS) == {
        "active": 12,
        "accepted": 2257,
        "handled": 2250,  # accepted - dropped
        "requests": 4100,  # summed over server zones
        "reading": 0,
        "writing": 7,  # active - idle
        "waiting": 5,
    }


@pytest.mark.parametrize(
    "document",
    [
        {},
        [],
        {"connections": {"accepted": 1, "active": 1, "idle": 0}},  # no dropped
        {"connections": {"accepted": "1", "dropped": 0, "active": 1, "idle": 0}},
        {**STATUS, "http": {"server_zones": {"z": {"requests": {}}}}},
    ],
)
def test_what_is_not_angie_status_reads_as_nothing(document: object) -> None:
    assert parse_angie_status(document) is None


def test_no_server_zones_counts_zero_requests() -> None:
    reading = parse_angie_status({"connections": STATUS["connections"]})
    assert reading is not None
    assert reading["requests"] == 0


def test_metrics_scrape_exports_angie_numbers_under_nic_names(tmp_path: Path) -> None:
    api = FakeAngieApi()
    readings: list[dict[str, int]] = []

    async def body(socket: Path) -> None:
        readings.append(await angie_counters(socket))
        api.status = {"not": "angie"}
        with pytest.raises(DataPlaneError):
            await angie_counters(socket)

    serve(tmp_path, api, body)
    metrics = Metrics("ferryman")
    # What the /metrics scrape does with the counters.
    metrics.stub_status.reading = readings[0]
    exposed = metrics.exposition().decode()
    for line in [
        'nginx_ingress_nginx_up{class="ferryman"} 1.0',
        'nginx_ingress_nginx_connections_accepted{class="ferryman"} 2257.0',
        'nginx_ingress_nginx_connections_handled{class="ferryman"} 2250.0',
        'nginx_ingress_nginx_connections_active{class="ferryman"} 12.0',
        'nginx_ingress_nginx_connections_waiting{class="ferryman"} 5.0',
        'nginx_ingress_nginx_http_requests_total{class="ferryman"} 4100.0',
    ]:
        assert line in exposed


def _upstream(current: int) -> dict[str, Any]:
    peer = {"server": "80.app.default.ferryman.internal", "selected": {"current": current}}
    return {"peers": {"10.0.0.1:80": peer}, "keepalive": 0}


@pytest.mark.parametrize(
    ("at_peer", "peers_left", "measured"),
    [
        (3, False, True),  # every request at a named peer
        (3, True, True),  # a peer left, but every request is at a named one
        (1, False, True),  # the others are not at any upstream (nothing left)
        (1, True, False),  # the others may be at a peer that left: unnamed
    ],
)
def test_requests_angie_cannot_name_make_peers_unmeasured(
    tmp_path: Path, at_peer: int, peers_left: bool, measured: bool
) -> None:
    """Processing 3 in the public servers' zone; ``at_peer`` of them at a peer."""
    api = FakeAngieApi()
    api.status = {**STATUS, "http": {**STATUS["http"], "upstreams": {"u": _upstream(at_peer)}}}

    async def body(socket: Path) -> None:
        reading = await angie_in_flight(socket, None, peers_left)
        assert reading.replica == 3
        assert dict(reading.peers) == {"10.0.0.1:80": at_peer}
        assert reading.peers_measured is measured

    serve(tmp_path, api, body)
