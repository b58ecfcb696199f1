"""The main configuration the render tests and their neighbours render with.

Moved from tests/unit/test_render.py, whose tests and others share them."""

from __future__ import annotations

from ferryman.configs.model import MainConfig
from testkit.nginx_check import LUA, STATE

MAIN = MainConfig(
    state_dir=STATE,
    endpoints_socket=f"{STATE}/run/nginx-endpoints.sock",
    http_port=80,
    https_port=443,
    lua_package_path=f"{LUA}/?.lua;/usr/share/lua/5.1/?.lua;;",
    modules=(
        "/usr/lib/nginx/modules/ndk_http_module.so",
        "/usr/lib/nginx/modules/ngx_http_lua_module.so",
        "/usr/lib/nginx/modules/ngx_http_ferryman_module.so",
    ),
    fast_module=True,
    worker_processes="auto",
    worker_shutdown_timeout="",
    worker_user="nobody nogroup",
    shared_dict_size="128m",
    fallback_certificate=f"{STATE}/fallback.pem",
    status_socket=f"{STATE}/run/nginx-status.sock",
    status_port=8080,
    status_allow=("127.0.0.1/32", "10.0.0.0/8"),
    health_uri="/nginx-health",
    latency_socket=f"{STATE}/latency.sock",
    public=True,
)
