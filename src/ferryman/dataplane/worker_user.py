"""The user NGINX's workers run as, and whether they can reach the state dir.

Started as root, NGINX's workers drop to ``nobody``; started unprivileged, they
keep ferryman's user. What they create or read at run time (buffered request
bodies, the latency socket, TLS passthrough's hop to HTTPS) must then be
reachable by that user, so the composition root asks here before it prepares
the state dir and binds sockets.
"""

from __future__ import annotations

import grp
import os
import pwd
from pathlib import Path


def worker_user() -> tuple[str | None, int | None]:
    """NGINX workers drop root to nobody; unprivileged, they keep our user."""
    if os.geteuid() != 0:
        return None, None
    nobody = pwd.getpwnam("nobody")
    group = grp.getgrgid(nobody.pw_gid).gr_name
    return f"nobody {group}", nobody.pw_uid


def worker_gid() -> int | None:
    """The group of NGINX's workers when they run as another user (``worker_user``)."""
    return pwd.getpwnam("nobody").pw_gid if os.geteuid() == 0 else None


def traversable_by_others(path: Path) -> bool:
    """Every parent of ``path`` lets other users pass (workers running as nobody)."""
    return all(p.stat().st_mode & 0o001 for p in path.parents)
