"""Other local users: NGINX's control sockets and the latency socket are not theirs.

Run as root (as ferryman runs on a host): the other user is ``nobody``, or a uid
nothing else uses.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import re
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    ingress,
    path,
    rule,
    served_by,
    service_with_backends,
)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")

NOBODY = pwd.getpwnam("nobody")
STRANGER = 54321  # a uid and gid no account has


def as_user(uid: int, gid: int, action: Callable[[], None]) -> str:
    """Runs ``action`` in a child process as ``uid``: "ok", or the error's name."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        outcome = "ok"
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            action()
        except BaseException as e:
            outcome = type(e).__name__
        os.write(write, outcome.encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as r:
        return r.read()


def _app(ferryman: Ferryman, backends: Backends) -> None:
    ferryman.write("svc", service_with_backends("app", [backends.start("app")]))
    ferryman.write("ing", ingress("r", [rule("local.test", path("/", "app"))]))


def _push_socket(ferryman: Ferryman) -> Path:
    """The push socket NGINX listens on, as nginx.conf names it."""
    conf = (ferryman.state / "nginx.conf").read_text()
    m = re.search(r"listen unix:(\S+nginx-endpoints\.sock);", conf)
    assert m is not None
    return Path(m.group(1))


def _connect(sock: Path) -> Callable[[], None]:
    def action() -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(str(sock))

    return action


def test_a_socket_dir_another_user_made_first_is_not_used(
    tmp_path: Path, backends: Backends
) -> None:
    # A state dir this long puts the sockets in the temporary directory; they
    # were in /tmp/ferryman-<hash of the state dir>, a name anyone could take first.
    ferryman = Ferryman(tmp_path / ("long-state-dir-" * 5))
    assert len(str(ferryman.state)) > 100
    digest = hashlib.sha256(str(ferryman.state.resolve()).encode()).hexdigest()[:12]
    predictable = Path(tempfile.gettempdir()) / f"ferryman-{digest}"

    def squat() -> None:
        predictable.mkdir()
        predictable.chmod(0o777)

    assert as_user(NOBODY.pw_uid, NOBODY.pw_gid, squat) == "ok"
    try:
        _app(ferryman, backends)
        ferryman.start()
        assert served_by(ferryman, "local.test", "/") == "app"
        sock = _push_socket(ferryman)
        assert sock.parent != predictable
        assert not any(predictable.iterdir())
        # The owner of the squatted directory cannot reach the push socket.
        assert as_user(NOBODY.pw_uid, NOBODY.pw_gid, _connect(sock)) == "PermissionError"
        assert (sock.parent.stat().st_uid, sock.parent.stat().st_mode & 0o777) == (0, 0o700)
        assert ferryman.stop() == 0
        assert not sock.parent.exists()  # the random directory goes with ferryman
    finally:
        if ferryman.proc is not None and ferryman.proc.poll() is None:
            ferryman.stop()
        for p in predictable.iterdir():
            p.unlink()
        predictable.rmdir()


@pytest.fixture
def shallow_ferryman(flavour: str) -> Iterator[Ferryman]:
    """A ferryman whose state dir is shallow enough for its sockets to live in
    its run/ (pytest's tmp_path can be too deep, under pytest-xdist always)."""
    workdir = Path(tempfile.mkdtemp(prefix="fm-"))
    f = Ferryman(workdir, flavour=flavour)
    try:
        yield f
    finally:
        if f.proc is not None and f.proc.poll() is None:
            f.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.mark.parametrize("made_as", ["another user's directory", "a symlink"])
def test_a_run_dir_that_is_not_ferrymans_own_is_refused(
    shallow_ferryman: Ferryman, backends: Backends, tmp_path: Path, made_as: str
) -> None:
    ferryman = shallow_ferryman
    ferryman.state.mkdir()
    run = ferryman.state / "run"
    assert len(str(run / "nginx-config-version.sock")) <= 100  # run/ is where they go
    if made_as == "a symlink":
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        run.symlink_to(elsewhere)
    else:
        run.mkdir(mode=0o777)
        os.chown(run, NOBODY.pw_uid, NOBODY.pw_gid)
    _app(ferryman, backends)
    ferryman.start(wait=False)
    assert ferryman.proc is not None
    assert ferryman.proc.wait(15) == 2
    logs = ferryman.logs()
    state = ferryman.state.resolve()
    assert f"ferryman run: --state-dir {state}: {state / 'run'}" in logs, logs
    assert "Traceback" not in logs
    assert not list(run.glob("*.sock"))  # nothing of ferryman's was put there


def _latency_ferryman(tmp_path: Path, backends: Backends) -> Ferryman:
    f = Ferryman(tmp_path, extra_args=["--enable-latency-metrics"])
    _app(f, backends)
    f.start()
    return f


def _send(sock: Path, *datagrams: bytes) -> Callable[[], None]:
    def action() -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            for d in datagrams:
                s.sendto(d, str(sock))

    return action


def _forged(n: int) -> list[bytes]:
    return [
        f"<190>Nov 23 12:00:00 ferryman: forged{i}.test default/app:80 10.0.0.{i % 250}:80 "
        "200 0.001".encode()
        for i in range(n)
    ]


SERIES = "nginx_ingress_controller_upstream_server_response_latency_ms_count"


def test_other_users_cannot_write_to_the_latency_socket(tmp_path: Path, backends: Backends) -> None:
    f = _latency_ferryman(tmp_path, backends)
    try:
        sock = f.state / "latency.sock"
        assert as_user(STRANGER, STRANGER, _send(sock, *_forged(10))) == "PermissionError"
        # NGINX's workers (nobody) still can: real requests are measured.
        assert served_by(f, "local.test", "/") == "app"

        def counted() -> float:
            return sum(v for k, v in f.metrics().items() if k.startswith(SERIES))

        assert eventually(lambda: counted() == 1, 60, "the real request's sample")
    finally:
        f.stop()


def test_forged_samples_do_not_grow_metrics(tmp_path: Path, backends: Backends) -> None:
    f = _latency_ferryman(tmp_path, backends)
    try:
        assert served_by(f, "local.test", "/") == "app"
        sock = f.state / "latency.sock"
        # What a worker's group could send: lines for hosts and peers nobody routes.
        assert as_user(NOBODY.pw_uid, NOBODY.pw_gid, _send(sock, *_forged(2000))) == "ok"
        dropped = 'ferryman_latency_samples_dropped_total{reason="unknown"}'
        eventually(lambda: f.metrics().get(dropped) == 2000, 60, "2,000 samples dropped")
        series = [k for k in f.metrics() if k.startswith(SERIES)]
        assert len(series) == 1, series  # the real request's
        size = len(httpx.get(f"http://127.0.0.1:{f.metrics_port}/metrics", timeout=5).content)
        print(f"/metrics after 2,000 forged samples: {size} bytes")
        assert size < 50_000
    finally:
        f.stop()
