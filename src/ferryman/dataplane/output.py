"""A data plane that only writes files: ``ferryman render`` and tests of the controller."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ferryman.dataplane.files import atomic_write


class OutputDirectory:
    """Writes the configuration under ``root``; endpoint sets go to ``endpoints.txt``."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self.endpoints: dict[str, str] = {}
        self.reloads = 0

    async def apply(self, files: Mapping[str, str | None]) -> float:
        for rel, text in files.items():
            path = self._root / rel
            if text is None:
                path.unlink(missing_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(path, text)
        self.reloads += 1
        return 0.0

    async def push_endpoints(self, sets: Mapping[str, str], full: bool) -> int:
        if full:
            self.endpoints.clear()
        for key, peers in sets.items():
            if peers:
                self.endpoints[key] = peers
            else:
                self.endpoints.pop(key, None)
        lines = [f"{k}\t{v}\n" for k, v in sorted(self.endpoints.items())]
        atomic_write(self._root / "endpoints.txt", "".join(lines))
        return len(lines)
