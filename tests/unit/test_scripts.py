"""The repository's scripts, run as on a fresh machine (their collaborators stubbed)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _stub(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def test_bench_finds_the_uv_that_setup_installed(tmp_path: Path) -> None:
    """setup.sh installs uv into ~/.local/bin, which a fresh shell's PATH lacks."""
    repo, home, tools = tmp_path / "repo", tmp_path / "home", tmp_path / "tools"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "bench.sh", repo / "scripts" / "bench.sh")
    _stub(repo / "scripts" / "setup.sh", "exit 0")
    _stub(repo / ".venv" / "bin" / "python", 'echo "bench ran"')
    _stub(home / ".local" / "bin" / "uv", 'echo "uv $*"')
    _stub(tools / "wrk", "exit 0")
    env = {"HOME": str(home), "PATH": f"{tools}:/usr/bin:/bin"}
    assert shutil.which("uv", path=env["PATH"]) is None
    run = subprocess.run(
        ["bash", str(repo / "scripts" / "bench.sh"), "--sizes", "100"],
        capture_output=True,
        text=True,
        env={**env, "LANG": os.environ.get("LANG", "C")},
        timeout=30,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["uv sync --quiet --frozen --group bench", "bench ran"]


def test_ferryman_starts_from_the_bytecode_setup_compiled() -> None:
    """scripts/setup.sh compiles the virtualenv's libraries once: where
    PYTHONDONTWRITEBYTECODE is set, nothing else would, and every start would
    compile them again (bench/cold_start.py, 20 Ingresses: ~0.8 s to ready, not ~0.4 s)."""
    python = ROOT / ".venv" / "bin" / "python"
    run = subprocess.run(
        [str(python), "-v", "-c", "import ferryman.app.cli, ferryman.app.root"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        timeout=60,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    # python -v: "# code object from '<file>'", the .pyc when one was read.
    from_source = [
        line
        for line in run.stderr.splitlines()
        if line.startswith("# code object from ") and "site-packages" in line
        and line.rstrip("'").endswith(".py")
    ]  # fmt: skip
    assert from_source == []
