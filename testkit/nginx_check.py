"""A rendered nginx.conf placed into a temporary state directory and checked
with a real ``nginx -t``.

The unit tests render the main configuration for fixed placeholder paths
(``STATE``, ``LUA``) so that golden files stay stable; to load such text, NGINX
needs those paths to be a real directory: this module holds the placeholders
and the one way every test turns the text into a directory NGINX accepts.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import ferryman
from ferryman.dataplane.fallback import ensure_fallback_certificate

# The golden files stay with the unit tests that compare against them.
GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "unit" / "golden"
STATE = "/var/lib/ferryman"
LUA = "/opt/ferryman/lua"
LUA_DIR = Path(ferryman.__file__).parent / "dataplane" / "lua"
MODULE = "ngx_http_ferryman_module.so"
# The temp directories NGINX opens at start (its *_temp_path defaults under -p).
_TEMP_DIRS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")


def placed(main: str, state: Path) -> str:
    """``main`` with the placeholders pointed at ``state`` and this tree's Lua,
    without the ``user`` line (the tests do not run as root) and on the
    unprivileged ports 18080/18443. With $FERRYMAN_TEST_NGINX_MODULES_DIR set,
    that directory's module is the one loaded (a private build)."""
    main = main.replace(STATE, str(state)).replace(LUA, str(LUA_DIR))
    if modules := os.environ.get("FERRYMAN_TEST_NGINX_MODULES_DIR"):
        main = main.replace(f"/usr/lib/nginx/modules/{MODULE}", f"{modules}/{MODULE}")
    main = main.replace("user nobody nogroup;\n", "")
    return main.replace("listen 80 ", "listen 18080 ").replace("listen 443 ", "listen 18443 ")


def assert_nginx_t(
    state: Path,
    main: str,
    files: Mapping[str, str] | None = None,
    *,
    fallback: bool = True,
) -> None:
    """Write ``main`` (rendered for STATE) as ``state``/nginx.conf, beside the
    golden config-version.conf, the other ``files`` and (with ``fallback``) the
    fallback certificate, and assert that ``nginx -t`` accepts it."""
    (state / "nginx.conf").write_text(placed(main, state))
    for name, text in (files or {}).items():
        (state / name).write_text(text)
    (state / "config-version.conf").write_text(
        (GOLDEN / "config-version.conf").read_text().replace(STATE, str(state))
    )
    (state / "run").mkdir()
    for sub in _TEMP_DIRS:
        (state / "tmp" / sub).mkdir(parents=True)
    if fallback:
        ensure_fallback_certificate(state / "fallback.pem")
    result = subprocess.run(
        ["nginx", "-t", "-p", str(state), "-c", f"{state}/nginx.conf", "-e", "stderr"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
