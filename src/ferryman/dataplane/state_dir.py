"""The state dir's layout and its preparation: where NGINX's configuration,
sockets, temporary files and fallback certificate go, made safe before NGINX
starts and cleaned up after it stops.

``Paths`` names every file and socket (unix socket paths must fit in 108
bytes, so the sockets move to a short private directory when the state dir is
deep); ``own_state_dir`` and ``prepare_state_dir`` make the directories with
the owners and modes that keep other users out; ``remove_if_stale`` clears a
socket a failed reload left behind. Apart from ``nginx`` (the process
manager) because the layout is made before any NGINX starts, and ``render.render``
writes into it without starting one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import socket
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from ferryman.dataplane.private_dir import new_private_directory, private_directory
from ferryman.engine.settings import SettingsError

# No longer than the even one's name: that decides where the sockets fit.
_ODD_SOCKET = "nginx-version-odd.sock"
# sun_path is 108 bytes on Linux; NGINX refuses longer unix socket paths.
_MAX_SOCKET_PATH = 100


@dataclass(frozen=True)
class Paths:
    state_dir: Path
    # Where the sockets go when run/ in the state dir makes their paths too long:
    # a private directory with a random name (see private_dir.py).
    short_socket_dir: Path | None = None

    @property
    def sockets_fit_in_state_dir(self) -> bool:
        longest = self.state_dir / "run" / "nginx-config-version.sock"
        return len(str(longest)) <= _MAX_SOCKET_PATH

    @property
    def socket_dir(self) -> Path:
        """``run/`` in the state dir, or the short directory made for this run."""
        return self.short_socket_dir or self.state_dir / "run"

    @property
    def main(self) -> Path:
        return self.state_dir / "nginx.conf"

    @property
    def version_conf(self) -> Path:
        return self.state_dir / "config-version.conf"

    @property
    def version_socket(self) -> Path:
        return self.socket_dir / "nginx-config-version.sock"

    def generation_socket(self, version: int) -> Path:
        """Where the workers of configuration ``version`` answer its number.

        Consecutive versions listen on different sockets, so an answer there can
        only come from a new worker. On one shared socket the old workers kept
        winning the accept for the ~100 ms NGINX's master waits before it tells
        them to quit, and every reload's confirmation waited that long (at
        start-up, a fifth of the time to ready). NGINX deletes the socket the
        new configuration no longer names.
        """
        return self.version_socket if version % 2 == 0 else self.socket_dir / _ODD_SOCKET

    @property
    def latency_socket(self) -> Path:
        # In the state dir itself (0711): NGINX workers, maybe another user, write to it.
        return self.state_dir / "latency.sock"

    @property
    def status_socket(self) -> Path:
        return self.socket_dir / "nginx-status.sock"

    @property
    def endpoints_socket(self) -> Path:
        return self.socket_dir / "nginx-endpoints.sock"

    @property
    def fallback_certificate(self) -> Path:
        return self.state_dir / "fallback.pem"

    @property
    def tmp(self) -> Path:
        return self.state_dir / "tmp"


def remove_if_stale(path: Path) -> None:
    """Remove a unix socket nothing listens on.

    A reload that failed leaves its version socket behind (NGINX bound it for
    the new configuration, then dropped that without removing it), and binding
    it again fails every retry. One whose confirmation only timed out is live:
    NGINX runs that configuration, and the retry, the same version, reuses it.
    """
    with socket.socket(socket.AF_UNIX) as s:
        s.setblocking(False)
        try:
            s.connect(str(path))
        except ConnectionRefusedError:
            path.unlink(missing_ok=True)
        except OSError:  # none there, or a listener with its backlog full
            pass


def prepare_state_dir(
    paths: Paths, worker_uid: int | None, short_dir: Callable[[], Path] | None = None
) -> Paths:
    """Create the layout; returns ``paths`` with the private socket directory
    (``private_dir``: raises ``UnsafeDirectoryError`` when it is not private),
    made by ``short_dir`` when the state dir is too deep (a new random one by
    default)."""
    paths.state_dir.mkdir(parents=True, exist_ok=True)
    # Workers (maybe another user) must reach tmp/, but nobody else need list it.
    paths.state_dir.chmod(0o711)
    paths.tmp.mkdir(exist_ok=True)
    for sub in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        d = paths.tmp / sub
        d.mkdir(exist_ok=True)
        if worker_uid is not None:
            os.chown(d, worker_uid, -1)
    if paths.sockets_fit_in_state_dir:
        private_directory(paths.socket_dir)
        return paths
    made = short_dir() if short_dir else new_private_directory("ferryman-")
    return replace(paths, short_socket_dir=made)


def render_socket_dir(output: Path) -> Path:
    """Where ``render`` names the sockets when ``output`` is too deep for them:
    a private directory named for ``output``, kept after the render, so that
    ``nginx -t`` of the output can bind them (nothing else ever listens
    there), and rendering the same output again reuses it rather than leaving
    one more behind. A directory of that name that is not ours is refused
    (``private_directory``), as a run's would be."""
    digest = hashlib.sha256(str(output.resolve()).encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"ferryman-render-{digest}"
    private_directory(path)
    return path


def remove_short_socket_dir(paths: Paths) -> None:
    """The random directory made for the sockets, at exit (NGINX removed its sockets)."""
    if paths.short_socket_dir is not None:
        shutil.rmtree(paths.short_socket_dir, ignore_errors=True)


def own_state_dir(state_dir: Path) -> Path:
    """Where ``run`` keeps its state: ``state_dir``, or a folder of its own in it.

    The state dir is made owner-only (0711) so that nobody else can replace the
    configuration NGINX loads or reach the push socket; that needs its owner. A
    Kubernetes emptyDir is root's (mode 0777) while ferryman runs as uid 101, so
    then ferryman makes ``ferryman-<uid>`` inside it and keeps everything there.
    """
    uid = os.geteuid()
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        if uid == 0 or state_dir.stat().st_uid == uid:
            return state_dir
        own = state_dir / f"ferryman-{uid}"
        with contextlib.suppress(FileExistsError):
            own.mkdir(mode=0o700)
        st = own.lstat()
    except OSError as e:
        raise SettingsError(f"--state-dir {state_dir}: {e.strerror} (ferryman is uid {uid})") from e
    # A folder somebody else put there first could hold their configuration.
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid:
        raise SettingsError(f"--state-dir {state_dir}: {own} exists and is not uid {uid}'s folder")
    return own
