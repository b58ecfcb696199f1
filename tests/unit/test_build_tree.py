"""--nginx-binary's own build: its modules and Lua libraries found beside it."""

from __future__ import annotations

from pathlib import Path

from ferryman.app.build_tree import BuildTree, beside
from ferryman.app.cli import parser
from ferryman.app.flag_settings import run_combination_error, run_settings


def _tree(root: Path, lua: bool = True) -> Path:
    (root / "sbin").mkdir(parents=True)
    binary = root / "sbin" / "nginx"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    (root / "modules").mkdir()
    (root / "modules" / "ngx_http_lua_module.so").write_bytes(b"")
    if lua:
        (root / "lua" / "resty").mkdir(parents=True)
        (root / "lua" / "resty" / "core.lua").write_text("")
    return binary


def test_a_build_tree_is_found_beside_its_binary(tmp_path: Path) -> None:
    binary = _tree(tmp_path / "b")
    assert beside(str(binary)) == BuildTree(tmp_path / "b" / "modules", tmp_path / "b" / "lua")
    assert beside(str(_tree(tmp_path / "c", lua=False))) == BuildTree(
        tmp_path / "c" / "modules", None
    )


def test_a_binary_without_modules_beside_it_uses_the_systems(tmp_path: Path) -> None:
    (tmp_path / "sbin").mkdir()
    lone = tmp_path / "sbin" / "nginx"
    lone.write_text("#!/bin/sh\n")
    lone.chmod(0o755)
    assert beside(str(lone)) is None
    assert beside(str(tmp_path / "missing")) is None
    args = parser().parse_args(["run", "--state-dir", str(tmp_path), "--nginx-binary", str(lone)])
    assert run_settings(args).nginx.modules_dir == Path("/usr/lib/nginx/modules")


def test_run_takes_the_builds_tree_unless_told_otherwise(tmp_path: Path) -> None:
    binary = _tree(tmp_path / "b")
    base = ["run", "--state-dir", str(tmp_path), "--nginx-binary", str(binary)]
    s = run_settings(parser().parse_args(base))
    assert (s.nginx.modules_dir, s.nginx.lua_dir) == (
        tmp_path / "b" / "modules",
        tmp_path / "b" / "lua",
    )
    s = run_settings(parser().parse_args([*base, "--nginx-modules-dir", "/opt/m"]))
    assert (s.nginx.modules_dir, s.nginx.lua_dir) == (Path("/opt/m"), None)


def test_angie_runs_from_a_build_with_the_lua_runtime_beside_it(tmp_path: Path) -> None:
    """One records data plane on every server: an Angie without the Lua runtime
    and ferryman's modules beside it (a system Angie) is refused, saying which
    build to run, rather than started with NGINX's modules it cannot load."""
    built = _tree(tmp_path / "b")
    (tmp_path / "b" / "sbin" / "angie").symlink_to(built)
    base = ["run", "--state-dir", str(tmp_path), "--data-plane", "angie"]
    as_built = [*base, "--data-plane-binary", str(tmp_path / "b" / "sbin" / "angie")]
    assert run_combination_error(parser().parse_args(as_built)) is None
    s = run_settings(parser().parse_args(as_built))
    assert (s.nginx.binary, s.nginx.modules_dir) == (as_built[-1], tmp_path / "b" / "modules")
    (tmp_path / "sys").mkdir()
    plain = tmp_path / "sys" / "angie"
    plain.write_text("#!/bin/sh\n")
    plain.chmod(0o755)
    error = run_combination_error(parser().parse_args([*base, "--data-plane-binary", str(plain)]))
    assert error is not None and f"{plain} has no Lua runtime" in error
    assert "scripts/build-angie.sh" in error
    missing = [*base, "--data-plane-binary", str(tmp_path / "nowhere" / "angie")]
    error = run_combination_error(parser().parse_args(missing))
    assert error is not None and "angie is not found: run the Angie" in error
    # Its modules named: taken as said.
    told = [*base, "--data-plane-binary", str(plain), "--nginx-modules-dir", "/opt/m"]
    assert run_combination_error(parser().parse_args(told)) is None
