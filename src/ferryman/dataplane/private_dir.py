"""Directories only ferryman's user may enter: where NGINX's control sockets live.

The push socket takes routes, endpoint sets and private keys, and NGINX makes
every unix socket it listens on 0666: the directory holding them is the only
lock. So it must be a real directory (not a symlink that another user points
elsewhere), owned by ferryman's user, mode 0700. A directory that fails this
is refused, never repaired: whoever made it may still hold it open or own it.

In a shared temporary directory a predictable name can be taken first by any
local user, so a directory made there gets a random name (``mkdtemp``: created
atomically, 0700, failing rather than reusing what exists).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from ferryman.dataplane.errors import DataPlaneError


class UnsafeDirectoryError(DataPlaneError):
    """A directory for the control sockets is not private to ferryman's user."""


def private_directory(path: Path) -> None:
    """Create ``path`` (0700) unless it exists; then make sure it is ours and private."""
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    _check_and_close(path)


def new_private_directory(prefix: str) -> Path:
    """A new directory with a random name in the temporary directory, checked as above."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    _check_and_close(path)
    return path


def _check_and_close(path: Path) -> None:
    """Checked through one file descriptor opened without following a symlink,
    so the directory checked is the one whose mode is set."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as e:
        raise UnsafeDirectoryError(
            f"{path}: not a directory ferryman can use for its sockets "
            f"(a symlink or a file?): {e.strerror}; remove it"
        ) from e
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid():
            raise UnsafeDirectoryError(
                f"{path} belongs to uid {st.st_uid}, not to ferryman's user "
                f"(uid {os.geteuid()}): another user could reach NGINX's control "
                "sockets; remove it"
            )
        if stat.S_IMODE(st.st_mode) != 0o700:
            os.fchmod(fd, 0o700)
    finally:
        os.close(fd)
