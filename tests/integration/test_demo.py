"""The README's first command, ``scripts/demo.sh``, run the way CI can: ``--once``."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "scripts" / "demo.sh"


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports free on every interface right now."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("0.0.0.0", 0))
        return [s.getsockname()[1] for s in socks]


def processes_mentioning(text: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if text in args:
                found.append(args)
    return found


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A short TMPDIR: NGINX's unix sockets live under the demo's state dir, and
    a socket path must fit in 108 bytes (pytest's tmp_path can be too long)."""
    path = Path(tempfile.mkdtemp(prefix="demo-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.timeout(150)
def test_demo_once_serves_the_cafe_and_cleans_up(short_tmp: Path) -> None:
    http, https, ready, metrics, coffee1, coffee2, tea = free_ports(7)
    env = {
        **os.environ,
        "TMPDIR": str(short_tmp),
        "FERRYMAN_HTTP_PORT": str(http),
        "FERRYMAN_HTTPS_PORT": str(https),
        "FERRYMAN_READY_PORT": str(ready),
        "FERRYMAN_METRICS_PORT": str(metrics),
        "DEMO_BACKEND_PORTS": f"{coffee1} {coffee2} {tea}",
    }
    proc = subprocess.Popen(
        [str(DEMO), "--once"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)  # the demo's trap stops its children
        try:
            out, _ = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
        pytest.fail(f"demo.sh --once did not finish within 120 s:\n{out}")

    assert proc.returncode == 0, out
    assert "demo: all checks passed" in out
    names = set(re.findall(r"^Server name: (\S+)$", out, re.M))
    assert names == {"coffee-1", "coffee-2", "tea-1"}, out
    assert f"Server address: 127.0.0.1:{tea}" in out
    assert f"Location: https://cafe.example.com:{https}/coffee" in out
    # Everything it started is gone, and so is its working directory.
    assert processes_mentioning(str(short_tmp)) == []
    assert list(short_tmp.glob("ferryman-demo.*")) == []
