"""ferryman.configs.render.Renderer: the NGINX text, checked against golden files.

The configuration is constant (it depends only on ferryman's settings): hosts,
routes and certificates travel the push channel. Set FERRYMAN_UPDATE_GOLDEN=1 to
rewrite the files in tests/unit/golden/ from the current output; review the diff
before keeping it.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from ferryman.configs.render import Renderer
from testkit.nginx_check import GOLDEN, STATE, assert_nginx_t
from testkit.render import MAIN

UPDATE = os.environ.get("FERRYMAN_UPDATE_GOLDEN") == "1"

BOOTSTRAP = dataclasses.replace(MAIN, public=False)
# Without ngx_http_ferryman_module (not built): the Lua balancer is the fast path.
# The non-default request settings ride along, so nginx -t sees their text too.
LUA_FAST_PATH = dataclasses.replace(
    MAIN,
    modules=MAIN.modules[:2],
    fast_module=False,
    compute_full_forwarded_for=False,
    strict_request_paths=True,
)


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path} is missing; run with FERRYMAN_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), (
        f"rendered text differs from {path}; if the change is intended, "
        "rerun with FERRYMAN_UPDATE_GOLDEN=1 and review the diff"
    )


def test_main_golden() -> None:
    check_golden("nginx.conf", Renderer().main(MAIN))


def test_bootstrap_main_golden() -> None:
    check_golden("nginx-bootstrap.conf", Renderer().main(BOOTSTRAP))


def test_lua_fast_path_golden() -> None:
    check_golden("nginx-lua-fast-path.conf", Renderer().main(LUA_FAST_PATH))


def test_the_fast_path_runs_in_the_module_when_it_is_loaded() -> None:
    text = Renderer().main(MAIN)
    # Twice the dict plus the module's counters: the dict always fills first.
    assert "ferryman_fast_zone 258m;" in text
    assert "ferryman.fast()" not in text
    lua = Renderer().main(LUA_FAST_PATH)
    assert "ferryman_fast" not in lua.replace("upstream ferryman_fast", "").replace(
        "http://ferryman_fast", ""
    )
    assert "ferryman.fast()" in lua


def test_config_version_golden() -> None:
    check_golden(
        "config-version.conf",
        Renderer().config_version(f"{STATE}/run/nginx-config-version.sock", 42),
    )


def test_bootstrap_has_no_public_listener() -> None:
    text = Renderer().main(dataclasses.replace(BOOTSTRAP, http_port=18080, https_port=18443))
    assert "18080" not in text
    assert "18443" not in text
    assert "ssl_certificate" not in text
    assert "route()" not in text
    # The push channel and the version server are there from the start.
    assert f"listen unix:{STATE}/run/nginx-endpoints.sock;" in text
    assert f"include {STATE}/config-version.conf;" in text


def test_public_listeners_use_the_configured_ports() -> None:
    text = Renderer().main(dataclasses.replace(MAIN, http_port=18080, https_port=18443))
    assert "listen 18080 default_server reuseport;" in text
    assert "listen 18443 ssl default_server reuseport;" in text
    # The router builds redirects with the HTTPS port.
    assert 'set $ferryman_https_port "18443";' in text


def test_main_without_worker_user_has_no_user_directive() -> None:
    text = Renderer().main(dataclasses.replace(MAIN, worker_user=None))
    assert "\nuser " not in text


def test_main_without_modules_loads_none() -> None:
    text = Renderer().main(dataclasses.replace(MAIN, modules=()))
    assert "load_module" not in text


def test_config_version_is_the_number_given() -> None:
    text = Renderer().config_version("/s.sock", 7)
    assert "listen unix:/s.sock;" in text
    assert 'return 200 "7";' in text


@pytest.mark.parametrize(
    "golden", ["nginx.conf", "nginx-bootstrap.conf", "nginx-lua-fast-path.conf"]
)
def test_golden_files_are_valid_nginx(tmp_path: Path, golden: str) -> None:
    """The golden text, placed into a state directory, passes ``nginx -t``."""
    modules = Path("/usr/lib/nginx/modules")
    assert (modules / "ngx_http_lua_module.so").exists(), "scripts/setup.sh installs it"
    assert (modules / "ngx_http_ferryman_module.so").exists(), "scripts/setup.sh builds it"
    # NGINX starts with the bootstrap while the certificate is still being
    # made (app._run): only the public listeners may need it.
    fallback = golden != "nginx-bootstrap.conf"
    assert_nginx_t(tmp_path, (GOLDEN / golden).read_text(), fallback=fallback)


def test_stub_status_text_is_parsed() -> None:
    from ferryman.observability.metrics import parse_stub_status

    text = (
        "Active connections: 3 \nserver accepts handled requests\n 17 16 42 \n"
        "Reading: 0 Writing: 1 Waiting: 2 \n"
    )
    assert parse_stub_status(text) == {
        "active": 3, "accepted": 17, "handled": 16, "requests": 42,
        "reading": 0, "writing": 1, "waiting": 2,
    }  # fmt: skip
    assert parse_stub_status("<html>502</html>") is None


def test_the_fallback_certificate_is_made_meanwhile_and_its_failure_told_when_awaited(
    tmp_path: Path,
) -> None:
    from ferryman.dataplane.fallback import begin_fallback_certificate

    (tmp_path / "file").write_text("")
    made = begin_fallback_certificate(tmp_path / "file" / "fallback.pem")
    with pytest.raises(OSError, match="cannot make the fallback certificate"):
        made()
    with pytest.raises(OSError, match="cannot make the fallback certificate"):
        made()  # asked again: the same answer
    made = begin_fallback_certificate(tmp_path / "fallback.pem")
    pem = made().read_text()
    assert "BEGIN PRIVATE KEY" in pem and "BEGIN CERTIFICATE" in pem
    # The Angie flavour waits for it before NGINX starts and run() again later.
    assert made().read_text() == pem


def test_waiting_twice_for_the_fallback_certificate_closes_no_other_file(tmp_path: Path) -> None:
    """The Angie flavour waits for it before Angie starts and again before the
    listeners open; the second wait once closed whatever file had since been
    given the pipe's descriptor number (the probes' socket: ferryman exited 1)."""
    import os
    import socket

    from ferryman.dataplane.fallback import begin_fallback_certificate

    made = begin_fallback_certificate(tmp_path / "fallback.pem")
    assert made() == tmp_path / "fallback.pem"
    with socket.socket() as other:  # takes the lowest free descriptor: the pipe's
        assert made() == tmp_path / "fallback.pem"
        os.fstat(other.fileno())  # raises EBADF when it was closed under it
    failing = begin_fallback_certificate(tmp_path / "missing" / "dir" / "fallback.pem")
    for _ in range(2):
        with pytest.raises(OSError, match="cannot make the fallback certificate"):
            failing()
