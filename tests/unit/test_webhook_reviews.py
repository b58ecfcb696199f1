"""The webhook's request path over real HTTP (aiohttp's test server): hostile
bodies answer 400 without an error-level log, and parses are capped."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Callable

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from ferryman.webhook import reviews
from ferryman.webhook.admission import Injector
from ferryman.webhook.reviews import MAX_BODY, Reviews


def _client(handler: Reviews) -> TestClient[web.Request, web.Application]:
    app = web.Application(client_max_size=MAX_BODY)
    app.router.add_post("/readiness-gates", handler.handle)
    return TestClient(TestServer(app))


async def _started(handler: Reviews) -> AsyncIterator[TestClient[web.Request, web.Application]]:
    client = _client(handler)
    await client.start_server()
    try:
        yield client
    finally:
        await client.close()


def _reviews(counted: list[str], slots: int = 2) -> Reviews:
    return Reviews(Injector("ferryman", lambda ns: []), counted.append, slots)


@pytest.mark.parametrize(
    ("body", "reason"),
    [(b"[" * 100_000, "nested too deeply"), (b'{"a": ' * 5_000, "nested too deeply"),
     (b"{not json", "not JSON"), (b"\xff\xfe", "not JSON")],
)  # fmt: skip
def test_hostile_bodies_answer_400_without_an_error_log(
    body: bytes, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    counted: list[str] = []

    async def go() -> tuple[int, object]:
        async for client in _started(_reviews(counted)):
            r = await client.post("/readiness-gates", data=body)
            return r.status, await r.json()
        raise AssertionError

    with caplog.at_level(logging.DEBUG):
        assert asyncio.run(go()) == (400, {"error": reason})
    assert counted == ["error"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not [r for r in caplog.records if r.exc_info]


def test_a_review_is_answered() -> None:
    counted: list[str] = []
    review = {"request": {"uid": "u", "kind": {"kind": "Pod"}, "operation": "CREATE"}}

    async def go() -> object:
        async for client in _started(_reviews(counted)):
            r = await client.post("/readiness-gates", json=review)
            assert r.status == 200
            return await r.json()
        raise AssertionError

    assert asyncio.run(go())["response"] == {"uid": "u", "allowed": True}  # type: ignore[index]
    assert counted == ["unchanged"]


def test_parses_run_off_the_loop_at_most_slots_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Above the cap a review waits for a slot (and is answered), never refused."""
    lock = threading.Lock()
    running, most, threads = [0], [0], set()
    release, full = threading.Event(), threading.Event()
    real: Callable[[bytes], object] = reviews.parse

    def parse(body: bytes) -> object:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
            if running[0] == 2:
                full.set()
            threads.add(threading.get_ident())
        release.wait(10)
        with lock:
            running[0] -= 1
        return real(body)

    monkeypatch.setattr(reviews, "parse", parse)
    counted: list[str] = []

    async def go() -> list[int]:
        async for client in _started(_reviews(counted, slots=2)):
            posts = [
                asyncio.ensure_future(client.post("/readiness-gates", data=b"{}")) for _ in range(5)
            ]
            # The cap's worth started; the rest wait.
            assert await asyncio.to_thread(full.wait, 10)
            assert not any(p.done() for p in posts)
            release.set()
            return [(await p).status for p in posts]
        raise AssertionError

    assert asyncio.run(go()) == [400] * 5  # "{}" is no AdmissionReview
    assert most[0] == 2
    assert threading.get_ident() not in threads
