"""Atomic file replacement: NGINX must never read a half-written file."""

from __future__ import annotations

import os
from pathlib import Path


def atomic_write(path: Path, data: bytes | str, mode: int = 0o644) -> None:
    raw = data.encode() if isinstance(data, str) else data
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, raw)
    finally:
        os.close(fd)
    tmp.chmod(mode)  # O_CREAT's mode is masked by the umask
    tmp.replace(path)
