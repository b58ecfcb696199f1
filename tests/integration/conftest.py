from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.harness import Backends, Ferryman, without_fast_module


@pytest.fixture
def backends() -> Iterator[Backends]:
    b = Backends()
    yield b
    b.stop_all()


FLAVOURS = ("nginx", "nginx-1.30", "angie")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``flavour`` is the server: ``nginx`` (Debian's) unless the test (or its
    module, as ``pytestmark``) is marked e.g. ``@pytest.mark.flavours("nginx",
    "nginx-1.30", "angie")`` (testkit/harness.py, ``Ferryman.flavour``)."""
    if "flavour" in metafunc.fixturenames:
        marker = metafunc.definition.get_closest_marker("flavours")
        flavours = marker.args if marker else ("nginx",)
        if "either_fast_path" in metafunc.fixturenames:
            flavours = ("nginx",)  # the fast path (module or Lua) is the NGINX flavour's
        metafunc.parametrize("flavour", flavours)


@pytest.fixture
def ferryman(tmp_path: Path, flavour: str) -> Iterator[Ferryman]:
    """A ferryman (not yet started) on the ``flavour`` data plane: write
    manifests, then call ``start()``."""
    f = Ferryman(tmp_path, flavour=flavour)
    yield f
    if f.proc is not None:
        f.stop()


@pytest.fixture(params=["module", "lua"])
def either_fast_path(
    request: pytest.FixtureRequest, ferryman: Ferryman, tmp_path: Path
) -> Ferryman:
    """The ``ferryman`` fixture, with the fast path in ngx_http_ferryman_module or,
    as when the module is not built, in Lua: for behaviour both must share."""
    if request.param == "lua":
        ferryman.extra_args += without_fast_module(tmp_path)
    return ferryman
