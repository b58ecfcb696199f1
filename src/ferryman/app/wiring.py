"""What a run and a render are both built from: the kinds they serve, the
shape of the data plane, its prepared state directory."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ferryman.dataplane.main_file import MainFile
from ferryman.dataplane.private_dir import UnsafeDirectoryError
from ferryman.dataplane.state_dir import Paths, prepare_state_dir
from ferryman.engine.settings import SettingsError
from ferryman.kinds import REGISTRY
from ferryman.kinds.translators import build as kind_translators
from ferryman.translators.context import Kinds, Shape

# What ferryman serves: every kind of ferryman.kinds.
BUILT_IN = Kinds(REGISTRY, kind_translators)

__all__ = ["BUILT_IN", "Kinds", "prepared", "shape"]


def shape(main: MainFile, user: str | None) -> Shape:
    """What this data plane serves: the stream block and TLS passthrough's hop
    only when their flags ask for them; h2c where the server has it."""
    h2c, hop = main.h2c(user)
    return Shape(stream=main.stream(user), tls_socket=main.tls_socket(user), h2c=h2c, h2c_hop=hop)


def prepared(
    paths: Paths,
    worker_uid: int | None,
    flag: str = "--state-dir",
    short_dir: Callable[[], Path] | None = None,
) -> Paths:
    """``paths`` with the state directory made safe to run from (``flag`` names
    it; ``short_dir``: as ``prepare_state_dir``)."""
    try:
        return prepare_state_dir(paths, worker_uid, short_dir)
    except UnsafeDirectoryError as e:
        raise SettingsError(f"{flag} {paths.state_dir}: {e}") from e
