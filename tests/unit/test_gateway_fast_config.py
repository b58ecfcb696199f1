"""The Gateway server's location with ngx_http_ferryman_module's Gateway
routing (``ferryman_gateway_route``, its X records): written only for a
module that has the directive, and accepted by ``nginx -t``."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from ferryman.configs.render import Renderer
from ferryman.dataplane.main_file import MODULES, main_config
from ferryman.dataplane.state_dir import Paths
from ferryman.engine.settings import GatewaySettings, NginxSettings, Settings
from testkit.nginx_check import assert_nginx_t

DEBIAN = Path("/usr/lib/nginx/modules")


def _settings(state: Path, modules: Path) -> Settings:
    return Settings(
        state_dir=state,
        gateway=GatewaySettings(enabled=True),
        nginx=NginxSettings(modules_dir=modules),
    )


def _fake_modules(path: Path, module: bytes) -> Path:
    path.mkdir()
    for name in MODULES:
        (path / name).write_bytes(b"")
    (path / "ngx_http_ferryman_module.so").write_bytes(module)
    return path


def test_only_a_module_with_the_directive_routes_the_gateway_server(tmp_path: Path) -> None:
    new = _fake_modules(tmp_path / "new", b"\0ferryman_route\0ferryman_gateway_route\0")
    old = _fake_modules(tmp_path / "old", b"\0ferryman_route\0")
    conf = Renderer().main(
        main_config(_settings(tmp_path, new), Paths(tmp_path), None, public=True)
    )
    gateway = conf.split("    # Gateway API listeners")[1]
    fast = gateway.split("        location / {")[1].split("\n        }\n")[0]
    assert "ferryman_gateway_route @ferryman_gateway;" in fast
    assert "proxy_pass http://ferryman_fast;" in fast
    assert "access_by_lua" not in fast and "proxy_set_header X-Forwarded-Proto $scheme;" in fast
    slow = gateway.split("        location @ferryman_gateway {")[1].split("\n        }\n")[0]
    assert "ferryman.gateway_route()" in slow
    conf = Renderer().main(
        main_config(_settings(tmp_path, old), Paths(tmp_path), None, public=True)
    )
    assert "ferryman_gateway_route" not in conf and "location @ferryman_gateway {" not in conf


@pytest.mark.skipif(not (DEBIAN / "ngx_http_lua_module.so").exists(), reason="no NGINX here")
def test_nginx_accepts_the_gateway_server() -> None:
    # A private build of the module when the tests have one.
    modules = Path(os.environ.get("FERRYMAN_TEST_NGINX_MODULES_DIR") or DEBIAN)
    # A short path: the unix sockets' paths must fit sun_path.
    with tempfile.TemporaryDirectory(prefix="fgw", dir="/tmp") as tmp:
        state = Path(tmp)
        main = main_config(_settings(state, modules), Paths(state), None, public=True)
        conf = Renderer().main(main)
        assert ("ferryman_gateway_route" in conf) == main.gateway_fast
        assert_nginx_t(state, conf, {"stream.conf": ""})
