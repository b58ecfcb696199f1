"""Where a Machine's instance lives: the one step of deletion that leaves the cluster.

A cloud provider would call its API here. ``LocalProvider`` is the provider
for machines with no cloud behind them (and for tests): each instance is a
file named ``<namespace>.<name>`` in a directory, deleting it removes the
file; with no directory there are no instances to delete.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol


class InstanceProvider(Protocol):
    async def delete(self, machine: Mapping[str, Any]) -> None:
        """Start removing the instance (idempotent)."""

    async def exists(self, machine: Mapping[str, Any]) -> bool:
        """Whether the instance is still there; deletion waits until it is not."""


class LocalProvider:
    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory

    def path(self, machine: Mapping[str, Any]) -> Path | None:
        if self.directory is None:
            return None
        md = machine.get("metadata") or {}
        return self.directory / f"{md.get('namespace', '')}.{md.get('name', '')}"

    async def delete(self, machine: Mapping[str, Any]) -> None:
        if (path := self.path(machine)) is not None:
            path.unlink(missing_ok=True)

    async def exists(self, machine: Mapping[str, Any]) -> bool:
        path = self.path(machine)
        return path is not None and path.exists()
