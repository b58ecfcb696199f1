"""The data plane: files on disk, the NGINX process, and the endpoints push.

``DataPlane`` is what the controller needs; ``NginxManager`` drives a real
NGINX and ``OutputDirectory`` only writes files (``ferryman render``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class DataPlane(Protocol):
    async def apply(self, files: Mapping[str, str | None]) -> float:
        """Make these files (path relative to the state dir; None: delete) live.

        Returns the seconds the reload took; raises ``ConfigError``.
        """
        ...

    async def push_endpoints(self, sets: Mapping[str, str], full: bool) -> int:
        """Send endpoint sets (key -> encoded peers, "" removes); returns their version."""
        ...
