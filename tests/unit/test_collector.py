"""ferryman.collector: the garbage collector paused through start-up."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from ferryman import collector


@pytest.fixture(autouse=True)
def _restored() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    if enabled:
        gc.enable()


def test_paused_until_resumed_then_what_start_up_kept_is_frozen() -> None:
    gc.enable()
    resume = collector.pause()
    assert not gc.isenabled()
    kept = [{"start-up": n} for n in range(100)]
    frozen_before = gc.get_freeze_count()
    resume()
    assert gc.isenabled()
    assert gc.get_freeze_count() >= frozen_before + len(kept)
    gc.disable()
    resume()  # once only: a second call changes nothing
    assert not gc.isenabled()


def test_a_collector_switched_off_stays_off() -> None:
    gc.disable()
    collector.pause()()
    assert not gc.isenabled()
    assert gc.get_freeze_count() == 0
