from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.harness import Backends, Ferryman


@pytest.fixture
def backends() -> Iterator[Backends]:
    b = Backends()
    yield b
    b.stop_all()


@pytest.fixture
def ferryman(tmp_path: Path) -> Iterator[Ferryman]:
    """A ferryman (not yet started): write manifests, then call ``start()``."""
    f = Ferryman(tmp_path)
    yield f
    if f.proc is not None:
        f.stop()
