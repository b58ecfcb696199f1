#!/usr/bin/env bash
# Installs everything ferryman needs on a fresh Debian machine (idempotent):
# NGINX with its Lua and stream modules, ferryman's own NGINX module (built
# against Debian's nginx-dev), uv, and the project's virtualenv.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v nginx >/dev/null || need_apt+=(nginx)
[ -e /usr/lib/nginx/modules/ngx_http_lua_module.so ] || need_apt+=(libnginx-mod-http-lua)
[ -e /usr/share/lua/5.1/resty/core.lua ] || need_apt+=(lua-resty-core)
[ -e /usr/lib/nginx/modules/ngx_stream_module.so ] || need_apt+=(libnginx-mod-stream)
command -v curl >/dev/null || need_apt+=(curl)
# ngx_http_ferryman_module is built against NGINX's own headers and flags.
[ -e /usr/share/nginx/src/configure ] || need_apt+=(nginx-dev)
command -v cc >/dev/null || need_apt+=(gcc)
command -v make >/dev/null || need_apt+=(make)
# Kubernetes-mode tests put their backends on a network namespace test host.
command -v ip >/dev/null || need_apt+=(iproute2)
if [ ${#need_apt[@]} -gt 0 ]; then
  scripts/apt-install.sh setup "${need_apt[@]}"
  # Debian's nginx package would start a system NGINX on port 80; ferryman runs its own.
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  if command -v service >/dev/null; then $SUDO service nginx stop >/dev/null 2>&1 || true; fi
fi

./scripts/build-module.sh
# Debian NGINX 1.22 only: h2c beside HTTP/1.1 on Gateway HTTP listeners.
./scripts/build-h2c-module.sh

if ! command -v uv >/dev/null; then
  echo "setup: installing uv from PyPI" >&2
  python3 -m pip install --quiet --user uv 2>/dev/null || python3 -m pip install --quiet uv
  export PATH="$HOME/.local/bin:$PATH"
fi
uv sync --quiet --frozen
# Bytecode once, for ferryman and its libraries: where PYTHONDONTWRITEBYTECODE is
# set (this machine class sets it) Python still reads .pyc files but never writes
# them, so without this every start compiles everything again (~0.4 s of 0.8 s to
# ready). A .pyc whose source changed since is ignored, never wrong; a file that
# does not compile fails where it is imported, as it would without this.
.venv/bin/python -m compileall -q -j 0 src "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null || true
# And nginx.conf's Jinja templates, compiled into the cache each start reads
# (configs/render.py; ~40 ms of a start's CPU otherwise, issue 31).
.venv/bin/python -m ferryman.configs.render
