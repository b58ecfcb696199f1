"""The compiled templates every start reads (configs/render.py, issue 31):
written by set-up, never by a run, and never served stale."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ferryman.configs import render


@pytest.fixture
def compiled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setattr(render, "_COMPILED", tmp_path / "compiled")
    render.template_environment.cache_clear()
    yield tmp_path / "compiled"
    render.template_environment.cache_clear()


def _compiles(monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[str]]:
    """A start's environment, and the templates it compiles from source."""
    env = render.template_environment()
    seen: list[str] = []
    real = env.compile

    def compile(source: str, name: str | None = None, *args: Any, **kwargs: Any) -> Any:
        seen.append(name or "")
        return real(source, name, *args, **kwargs)

    monkeypatch.setattr(env, "compile", compile)
    return env, seen


def test_a_start_reads_the_compiled_templates(
    compiled: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = render.compile_templates()
    assert "nginx.conf.tmpl" in names
    render.template_environment.cache_clear()
    env, seen = _compiles(monkeypatch)
    for name in names:
        env.get_template(name)
    assert seen == []


def test_a_run_writes_none_and_without_them_compiles(
    compiled: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiled.mkdir()
    env, seen = _compiles(monkeypatch)
    env.get_template("nginx.conf.tmpl")
    assert "nginx.conf.tmpl" in seen
    assert list(compiled.iterdir()) == []  # the image's root is read-only


def test_a_template_changed_since_is_compiled_again(
    compiled: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    render.compile_templates()
    for cache in compiled.iterdir():  # as if each template's source had changed
        cache.write_bytes(cache.read_bytes().replace(b"j2", b"j3", 1))
    render.template_environment.cache_clear()
    env, seen = _compiles(monkeypatch)
    env.get_template("config-version.conf.tmpl")
    assert seen == ["config-version.conf.tmpl"]
