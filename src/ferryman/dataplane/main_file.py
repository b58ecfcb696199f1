"""The main configuration file the data plane runs with (nginx.conf), the same
on every server: Debian's NGINX, NGINX 1.30 and Angie run one records data plane.

``main_config`` assembles the main configuration's model from the settings and
the state dir's paths (which dynamic modules to load, the listeners, the
sockets); ``MainFile`` renders it, with or without the public listeners, and
what the rest of the wiring asks of it (the stream block, the TLS hop's socket,
the config-version server). It is apart from ``app`` (the composition root,
which builds one ``MainFile`` for ``run`` and one for ``render``) so the wiring
there stays about wiring.
"""

from __future__ import annotations

import functools
import re
from dataclasses import replace
from pathlib import Path

from ferryman.configs.configmap import ConfigMapState, Tuning
from ferryman.configs.model import MainConfig
from ferryman.configs.render import Renderer
from ferryman.dataplane.server_version import serves_h2c
from ferryman.dataplane.state_dir import Paths
from ferryman.dataplane.worker_user import traversable_by_others
from ferryman.engine.settings import Settings, SettingsError

# ferryman.lua and its modules, found by lua_package_path.
LUA_DIR = Path(__file__).parent / "lua"
# ndk must load before the Lua module that links against it.
# ferryman's own module (dataplane/module, built by scripts/build-module.sh) is
# optional: without it the Lua balancer serves the fast path, more slowly.
FAST_MODULE = "ngx_http_ferryman_module.so"
MODULES = ("ndk_http_module.so", "ngx_http_lua_module.so", "ngx_stream_module.so", FAST_MODULE)
# TransportServers' balancer (built beside FAST_MODULE): it calls into
# FAST_MODULE's zone, so it is loaded after it and only with it, and only when
# TransportServers are wanted (--global-configuration, --enable-tls-passthrough).
STREAM_MODULE = "ngx_stream_ferryman_module.so"
# Debian's NGINX 1.22 only (scripts/build-h2c-module.sh): HTTP/2's preface
# read ahead on the Gateway's HTTP sockets (dataplane/server_version.py).
H2C_MODULE = "ngx_stream_ferryman_h2c_module.so"


# The directive of the module's Gateway routing (ngx_http_ferryman_gateway.c).
GATEWAY_ROUTE_DIRECTIVE = b"ferryman_gateway_route"
# The directive of its HTTP/2 preface detection (ngx_http_ferryman_h2c.c).
H2C_DETECT_DIRECTIVE = b"ferryman_h2c_detect"


def has_directive(module: Path, directive: bytes) -> bool:
    """Whether the module at ``module`` has ``directive``: one built from an
    older checkout may not, and NGINX would refuse a configuration naming it.
    Its directive names are strings in the .so (read once per version of the
    file)."""
    try:
        st = module.stat()
    except OSError:
        return False
    return directive in _strings(str(module), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=8)
def _strings(path: str, mtime_ns: int, size: int) -> frozenset[bytes]:
    """The directives among (GATEWAY_ROUTE_DIRECTIVE, H2C_DETECT_DIRECTIVE)
    the file at ``path`` holds."""
    del mtime_ns, size  # only tell versions of the file apart
    try:
        data = Path(path).read_bytes()
    except OSError:
        return frozenset()
    return frozenset(d for d in (GATEWAY_ROUTE_DIRECTIVE, H2C_DETECT_DIRECTIVE) if d in data)


def checked_path(flag: str, path: Path) -> Path:
    """``path`` resolved; a SettingsError naming ``flag`` if nginx.conf cannot hold it."""
    resolved = path.resolve()
    # The path is written unquoted into nginx.conf.
    if not re.fullmatch(r"[A-Za-z0-9/._+@-]+", str(resolved)):
        raise SettingsError(f"{flag} {resolved}: only letters, digits and / . _ + @ - are allowed")
    return resolved


def checked_paths(state_dir: Path) -> Paths:
    """Where the data plane's files and sockets go in ``state_dir`` (checked)."""
    return Paths(checked_path("--state-dir", state_dir))


def main_config(
    settings: Settings, paths: Paths, worker_user: str | None, *, public: bool
) -> MainConfig:
    modules_dir = checked_path("--nginx-modules-dir", settings.nginx.modules_dir)
    modules = tuple(str(modules_dir / m) for m in MODULES if (modules_dir / m).exists())
    # The stream block serves TransportServers' listeners, TLS passthrough and
    # Gateways' TLS listeners (TLSRoutes).
    stream = (
        bool(
            settings.transport.global_configuration
            or settings.transport.tls_passthrough
            or settings.gateway.enabled
        )
        and str(modules_dir / FAST_MODULE) in modules
        and str(modules_dir / "ngx_stream_module.so") in modules
        and (modules_dir / STREAM_MODULE).exists()
    )
    if stream:
        modules += (str(modules_dir / STREAM_MODULE),)
    h2c = settings.gateway.enabled and serves_h2c(settings.nginx.binary)
    fast_module = str(modules_dir / FAST_MODULE) in modules
    # Without h2c of its own, ferryman's module reads HTTP/2's preface on the
    # Gateway server's own HTTP sockets (ngx_http_ferryman_h2c.c).
    h2c_detect = (
        settings.gateway.enabled
        and not h2c
        and fast_module
        and has_directive(modules_dir / FAST_MODULE, H2C_DETECT_DIRECTIVE)
    )
    # With a module built before that, the Gateway's HTTP sockets are stream servers
    # that hand each connection to the Gateway server's HTTP/1.1 or HTTP/2
    # socket by its first bytes (nginx.conf.tmpl), where the module is.
    # Its workers connect to the Gateway server's unix sockets in the state
    # dir: as nobody (ferryman started as root) only when they can reach it;
    # else the HTTP listeners stay HTTP/1.1 only (and take no GRPCRoute).
    reachable = worker_user is None or traversable_by_others(paths.state_dir)
    h2c_hop = (
        settings.gateway.enabled
        and stream
        and not h2c
        and not h2c_detect
        and reachable
        and (modules_dir / H2C_MODULE).exists()
    )
    if h2c_hop:
        modules += (str(modules_dir / H2C_MODULE),)
    lua_dir = settings.nginx.lua_dir
    build_lua = f"{checked_path('--nginx-binary', lua_dir)}/?.lua;" if lua_dir else ""
    return MainConfig(
        state_dir=str(paths.state_dir),
        endpoints_socket=str(paths.endpoints_socket),
        http_port=settings.listen.http_port,
        https_port=settings.listen.https_port,
        lua_package_path=f"{LUA_DIR}/?.lua;{build_lua}/usr/share/lua/5.1/?.lua;;",
        modules=modules,
        fast_module=fast_module,
        gateway_fast=settings.gateway.enabled
        and fast_module
        and has_directive(modules_dir / FAST_MODULE, GATEWAY_ROUTE_DIRECTIVE),
        worker_processes=settings.nginx.worker_processes,
        worker_shutdown_timeout=settings.nginx.worker_shutdown_timeout,
        worker_user=worker_user,
        shared_dict_size=settings.nginx.shared_dict_size,
        fallback_certificate=str(paths.fallback_certificate),
        status_socket=str(paths.status_socket),
        status_port=settings.nginx.status_port,
        status_allow=settings.nginx.status_allow,
        health_uri=settings.nginx.health_uri,
        latency_socket=str(paths.latency_socket) if settings.nginx.latency_metrics else "",
        public=public,
        compute_full_forwarded_for=settings.nginx.compute_full_forwarded_for,
        strict_request_paths=settings.nginx.strict_request_paths,
        stream=stream,
        # Beside latency.sock, in the state dir NGINX's workers can traverse.
        tls_socket=str(paths.state_dir / "tls.sock")
        if stream and settings.transport.tls_passthrough
        else "",
        # Always: Ingresses' nginx.org/listen-ports open ports too (translators/listen_ports.py).
        http_listeners=True,
        gateway=settings.gateway.enabled,
        h2c=h2c,
        h2c_detect=h2c_detect,
        h2c_hop=h2c_hop,
        ipv6=not settings.listen.disable_ipv6,
    )


class MainFile:
    """nginx.conf as this run renders it, and what its settings imply."""

    name = "nginx.conf"

    def __init__(self, settings: Settings, paths: Paths) -> None:
        self.settings = settings
        self.paths = paths
        self.renderer = Renderer()

    def main(self, user: str | None, *, public: bool, tuning: Tuning | None = None) -> str:
        main = main_config(self.settings, self.paths, user, public=public)
        if tuning is not None:
            main = replace(main, tuning=tuning)
        return self.renderer.main(main)

    def stream(self, user: str | None) -> bool:
        """nginx.conf has the stream block TransportServers need."""
        return main_config(self.settings, self.paths, user, public=True).stream

    def tls_socket(self, user: str | None) -> str:
        """Where ferryman's HTTPS server listens behind TLS passthrough ("": none)."""
        return main_config(self.settings, self.paths, user, public=True).tls_socket

    def config_version(self, socket: str, version: int) -> str:
        return self.renderer.config_version(socket, version)

    def h2c(self, user: str | None) -> tuple[bool, bool]:
        """The Gateway's plaintext listeners serve h2c beside HTTP/1.1
        (GRPCRoutes): NGINX's own, the module's detection or the stream
        block's hop; and whether through that hop."""
        main = main_config(self.settings, self.paths, user, public=True)
        return main.h2c or main.h2c_detect or main.h2c_hop, main.h2c_hop

    def configmap(self, user: str | None) -> ConfigMapState | None:
        """--nginx-configmaps (and --ingress-nginx-configmap): its keys, rendering
        the public configuration."""
        inn = self.settings.nginx.ingress_nginx_configmap
        if self.settings.nginx.configmap is None and inn is None:
            return None
        namespace, name = self.settings.nginx.configmap or ("", "")

        def render(tuning: Tuning) -> dict[str, str]:
            return {self.name: self.main(user, public=True, tuning=tuning)}

        return ConfigMapState(namespace, name, render, inn)
