"""A bare NGINX with the Lua module and ferryman's Lua on its package path: the
Lua modules tested on their own (test_jwt_lua, test_egress_lua), without
ferryman's configuration around them."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

from ferryman.dataplane.main_file import LUA_DIR
from testkit.harness import eventually, reachable

MODULES = Path("/usr/lib/nginx/modules")


def nginx_conf(tmp: Path, http: str) -> str:
    """nginx.conf with ``http`` in its http block, everything NGINX writes under ``tmp``."""
    return f"""
load_module {MODULES}/ndk_http_module.so;
load_module {MODULES}/ngx_http_lua_module.so;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log info;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    lua_package_path "{LUA_DIR}/?.lua;/usr/share/lua/5.1/?.lua;;";
{http}
}}
"""


@contextlib.contextmanager
def running(tmp: Path, http: str, answering: Callable[[], object]) -> Iterator[None]:
    """That NGINX, running in ``tmp`` until the block ends, once ``answering``
    says it is up."""
    (tmp / "body").mkdir()
    # Its workers run as nobody: the checkout may be owner-only (a fresh clone
    # under mktemp -d is).
    reachable(Path(LUA_DIR))
    conf = tmp / "nginx.conf"
    conf.write_text(nginx_conf(tmp, http))
    proc = subprocess.Popen(
        ["nginx", "-p", str(tmp), "-c", str(conf), "-g", "daemon off;"],
        stderr=subprocess.DEVNULL,
    )
    try:
        eventually(answering, what="nginx answering")
        yield
    finally:
        proc.terminate()
        proc.wait(10)
