"""ferryman.observability.collector: the garbage collector paused through start-up."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ferryman.app import cli
from ferryman.observability import collector


@pytest.fixture(autouse=True)
def _restored() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    collector.resume()
    gc.unfreeze()
    if enabled:
        gc.enable()


def test_paused_until_resumed_then_what_start_up_kept_is_frozen() -> None:
    gc.enable()
    collector.pause()
    assert not gc.isenabled()
    collector.pause()  # app.run pauses too: still one pause
    kept = [{"start-up": n} for n in range(100)]
    frozen_before = gc.get_freeze_count()
    collector.resume()
    assert gc.isenabled()
    assert gc.get_freeze_count() >= frozen_before + len(kept)
    gc.disable()
    collector.resume()  # once only: a second call changes nothing
    assert not gc.isenabled()


def test_a_collector_switched_off_stays_off() -> None:
    gc.disable()
    collector.pause()
    collector.resume()
    assert not gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_the_entry_point_pauses_it_before_ferryman_is_imported() -> None:
    probe = (
        "import sys, ferryman.app.launch; print(sorted(m for m in sys.modules if 'ferryman' in m))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == (
        "['ferryman', 'ferryman.app', 'ferryman.app.launch', "
        "'ferryman.observability', 'ferryman.observability.collector']"
    )


def test_a_command_other_than_run_resumes_it(tmp_path: Path) -> None:
    gc.enable()
    collector.pause()
    (tmp_path / "in").mkdir()
    cli.main(["render", "--manifests", str(tmp_path / "in"), "--output", str(tmp_path / "out")])
    assert gc.isenabled()
