"""ferryman.engine.workqueue.WorkQueue: dedup, FIFO, retries with growing backoff."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from ferryman.engine.workqueue import BASE_DELAY, MAX_DELAY, WorkQueue


async def drain(q: WorkQueue[str]) -> list[str]:
    out = []
    while len(q):
        out.append(await q.get())
    return out


def test_a_key_queued_twice_is_handled_once() -> None:
    async def main() -> None:
        q: WorkQueue[str] = WorkQueue()
        q.add("a")
        q.add("a")
        assert len(q) == 1
        assert await drain(q) == ["a"]

    asyncio.run(main())


def test_fifo_order_and_dedup_keeps_the_first_position() -> None:
    async def main() -> None:
        q: WorkQueue[str] = WorkQueue()
        for key in ("a", "b", "c", "a", "b", "d"):
            q.add(key)
        assert await drain(q) == ["a", "b", "c", "d"]

    asyncio.run(main())


def test_a_key_taken_can_be_queued_again() -> None:
    async def main() -> None:
        q: WorkQueue[str] = WorkQueue()
        q.add("a")
        assert await q.get() == "a"
        q.add("a")  # changed again while being processed: must be seen again
        assert await drain(q) == ["a"]

    asyncio.run(main())


def test_get_waits_for_an_item() -> None:
    async def main() -> None:
        q: WorkQueue[str] = WorkQueue()
        waiter = asyncio.create_task(q.get())
        await asyncio.sleep(0.01)
        assert not waiter.done()
        q.add("late")
        assert await asyncio.wait_for(waiter, 1) == "late"

    asyncio.run(main())


def test_wait_for_item() -> None:
    async def main() -> None:
        q: WorkQueue[str] = WorkQueue()
        assert await q.wait_for_item(0.01) is False
        asyncio.get_running_loop().call_later(0.01, q.add, "x")
        assert await q.wait_for_item(1) is True
        assert await q.wait_for_item(0) is True  # already there

    asyncio.run(main())


def test_depth_is_reported() -> None:
    async def main() -> list[int]:
        depths: list[int] = []
        q: WorkQueue[str] = WorkQueue(on_depth=depths.append)
        q.add("a")
        q.add("b")
        q.add("a")
        await drain(q)
        return depths

    assert asyncio.run(main()) == [1, 2, 1, 0]


def test_retry_backoff_grows_and_is_capped_and_forget_resets_it() -> None:
    async def main() -> tuple[list[float], float]:
        q: WorkQueue[str] = WorkQueue()
        delays = [q.retry("k") for _ in range(30)]
        q.forget("k")
        return delays, q.retry("k")

    delays, again = asyncio.run(main())
    assert delays[0] == pytest.approx(BASE_DELAY)
    assert all(b > a for a, b in itertools.pairwise(delays[:5]))
    assert delays[1] == pytest.approx(2 * delays[0])
    assert max(delays) == MAX_DELAY
    assert delays[-1] == MAX_DELAY
    assert again == pytest.approx(BASE_DELAY)


def test_backoff_is_per_key() -> None:
    async def main() -> tuple[float, float]:
        q: WorkQueue[str] = WorkQueue()
        q.retry("a")
        q.retry("a")
        return q.retry("a"), q.retry("b")

    a, b = asyncio.run(main())
    assert a > b == pytest.approx(BASE_DELAY)


def test_a_retried_key_comes_back_after_its_delay() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        q: WorkQueue[str] = WorkQueue()
        start = loop.time()
        delay = q.retry("k")
        assert len(q) == 0
        assert await asyncio.wait_for(q.get(), 1) == "k"
        assert loop.time() - start >= delay * 0.9

    asyncio.run(main())


def test_a_retried_key_already_queued_is_not_duplicated() -> None:
    async def main() -> list[str]:
        q: WorkQueue[str] = WorkQueue()
        q.retry("k")
        q.add("k")
        await asyncio.sleep(BASE_DELAY * 4)
        return await drain(q)

    assert asyncio.run(main()) == ["k"]
