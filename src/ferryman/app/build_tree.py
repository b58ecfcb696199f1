"""The tree an NGINX build of ferryman's own keeps beside its binary
(scripts/build-nginx.sh: ``<prefix>/sbin/nginx``, ``<prefix>/modules/``,
``<prefix>/lua/``), so ``--nginx-binary PATH`` alone runs that build with its
own Lua module, ferryman's module and the lua-resty-core its Lua module
requires (a Debian NGINX's modules would not load into another version).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

# Debian's dynamic modules (libnginx-mod-*) and ferryman's (scripts/build-module.sh).
SYSTEM_MODULES = Path("/usr/lib/nginx/modules")


@dataclass(frozen=True)
class BuildTree:
    modules: Path
    lua: Path | None  # lua-resty-core and lua-resty-lrucache, when the build has them


def beside(binary: str) -> BuildTree | None:
    """The modules (and Lua libraries) of ``binary``'s build, or None when it
    keeps none beside it (a system NGINX: its modules are SYSTEM_MODULES)."""
    found = shutil.which(binary)
    if found is None:
        return None
    prefix = Path(found).resolve().parent.parent
    modules = prefix / "modules"
    if not (modules / "ngx_http_lua_module.so").exists():
        return None
    lua = prefix / "lua"
    return BuildTree(modules, lua if (lua / "resty" / "core.lua").exists() else None)
