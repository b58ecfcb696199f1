"""An in-memory ``DataPlane`` for controller tests: records what it was asked to
apply and can refuse chosen files the way ``nginx -t`` would."""

from __future__ import annotations

from collections.abc import Mapping

from ferryman.dataplane.errors import ConfigTestError


class FakeDataPlane:
    def __init__(self, refuse: frozenset[str] = frozenset()) -> None:
        self.refuse = refuse
        self.files: dict[str, str] = {}
        self.endpoints: dict[str, str] = {}
        self.reloads = 0
        self.failures = 0

    async def apply(self, files: Mapping[str, str | None]) -> float:
        bad = tuple(p for p in files if p in self.refuse and files[p] is not None)
        if bad:
            self.failures += 1
            raise ConfigTestError(f"[emerg] refused in /state/{bad[0]}:1", culprits=bad)
        for path, text in files.items():
            if text is None:
                self.files.pop(path, None)
            else:
                self.files[path] = text
        self.reloads += 1
        return 0.001

    async def push_endpoints(self, sets: Mapping[str, str], full: bool) -> int:
        if full:
            self.endpoints.clear()
        for key, peers in sets.items():
            if peers:
                self.endpoints[key] = peers
            else:
                self.endpoints.pop(key, None)
        return len(self.endpoints)
