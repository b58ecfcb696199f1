"""What rendering VirtualServer fields as NGINX directives would cost: the
upstream fields whose directives take no variable (``proxy_next_upstream``,
``proxy_buffering``, ``proxy_buffers``, ``proxy_buffer_size``,
``proxy_busy_buffers_size``, ``client_body_buffer_size``; ferryman keeps them
``Warning``, docs/virtualserver.md) would need a server and location per
VirtualServer, as NIC writes them, and a reload on every change.

    .venv/bin/python -m bench.vs_directives_reload [--servers 1 1000] [--reloads 5]

For each count: an NGINX configuration with that many servers (one upstream,
one ``location /`` with those directives each, as nginx.virtualserver.tmpl),
the time of ``nginx -t``, and of a reload: from ``nginx -s reload`` until a
request is answered by the new configuration (its generation number), the
median of ``--reloads``. Prints the numbers and the command line.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_DIRECTIVES = """\
            proxy_next_upstream error timeout http_502;
            proxy_next_upstream_timeout 5s;
            proxy_buffering off;
            proxy_buffers 8 8k;
            proxy_buffer_size 8k;
            proxy_busy_buffers_size 16k;
            client_body_buffer_size 16k;
            client_max_body_size 4m;"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def render(state: Path, port: int, servers: int, generation: int) -> str:
    blocks = []
    for i in range(servers):
        blocks.append(
            f"""
    upstream vs_default_cafe{i}_tea {{
        server 127.0.0.1:{10000 + i % 50000} max_fails=1 fail_timeout=10s max_conns=0;
        keepalive 16;
    }}
    server {{
        listen {port};
        server_name cafe{i}.example.com;
        location / {{
{_DIRECTIVES}
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_pass http://vs_default_cafe{i}_tea;
        }}
    }}"""
        )
    return f"""
worker_processes 2;
pid {state}/nginx.pid;
error_log {state}/error.log;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    server_names_hash_max_size 16384;
    client_body_temp_path {state}/tmp;
    proxy_temp_path {state}/tmp;
    fastcgi_temp_path {state}/tmp;
    uwsgi_temp_path {state}/tmp;
    scgi_temp_path {state}/tmp;
    server {{
        listen {port} default_server;
        location = /generation {{ return 200 "{generation}"; }}
    }}
{"".join(blocks)}
}}
"""


def _generation(port: int) -> str:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"GET /generation HTTP/1.0\r\nHost: x\r\n\r\n")
            data = b""
            while chunk := s.recv(4096):
                data += chunk
        return data.split(b"\r\n\r\n", 1)[-1].decode()
    except OSError:
        return ""


def measure(nginx: str, servers: int, reloads: int) -> dict[str, float]:
    state = Path(tempfile.mkdtemp(prefix="vs-directives-"))
    (state / "tmp").mkdir()
    conf = state / "nginx.conf"
    port = _free_port()
    conf.write_text(render(state, port, servers, 0))
    started = time.perf_counter()
    subprocess.run([nginx, "-t", "-q", "-c", str(conf)], check=True)
    check = time.perf_counter() - started
    subprocess.run([nginx, "-c", str(conf)], check=True)
    try:
        deadline = time.monotonic() + 30
        while _generation(port) != "0":
            if time.monotonic() > deadline:
                raise RuntimeError("nginx did not start")
            time.sleep(0.01)
        times = []
        for generation in range(1, reloads + 1):
            conf.write_text(render(state, port, servers, generation))
            started = time.perf_counter()
            subprocess.run(
                [nginx, "-c", str(conf), "-s", "reload"], check=True, stderr=subprocess.DEVNULL
            )
            while _generation(port) != str(generation):
                time.sleep(0.002)
            times.append(time.perf_counter() - started)
    finally:
        subprocess.run(
            [nginx, "-c", str(conf), "-s", "stop"], check=False, stderr=subprocess.DEVNULL
        )
        time.sleep(0.2)
        shutil.rmtree(state, ignore_errors=True)
    return {
        "servers": servers,
        "nginx_t_s": round(check, 3),
        "reload_p50_s": round(statistics.median(times), 3),
        "reload_max_s": round(max(times), 3),
        "config_bytes": len(render(state, port, servers, 0)),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--servers", type=int, nargs="+", default=[1, 1000])
    p.add_argument("--reloads", type=int, default=5)
    p.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    args = p.parse_args()
    print(
        "command:",
        " ".join([Path(sys.executable).name, "-m", "bench.vs_directives_reload", *sys.argv[1:]]),
    )
    for n in args.servers:
        print(measure(args.nginx, n, args.reloads), flush=True)


if __name__ == "__main__":
    main()
