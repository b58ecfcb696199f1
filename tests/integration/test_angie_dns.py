"""A real resolver follows ferryman's DNS answers with no reload.

Angie is not installable here, and Debian's NGINX 1.22 has no upstream ``resolve``.
But its ``resolver`` + ``proxy_pass http://$name:port`` path looks names up at
request time with the resolver code Angie's ``resolve`` grew from: so NGINX, given
the ``resolver`` line ferryman renders for Angie, is sent to the backend name's A
records, and an endpoint change moves its traffic without any reload.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from aiohttp import web

from ferryman.configs.angie import AngieRenderer, backend_dns_name
from ferryman.dataplane.dns import DnsServer, Zone
from tests.unit.test_angie import main_config

pytestmark = pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx not installed")

BACKEND = "ns/web:80"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""
    except urllib.error.URLError as e:  # NGINX still starting
        return 0, str(e.reason)


def _workers(master: int) -> set[int]:
    return {int(p) for p in Path(f"/proc/{master}/task/{master}/children").read_text().split()}


async def _until(port: int, want: tuple[int, str], timeout: float = 10.0) -> float:
    """Seconds until NGINX answers ``want``."""
    started = time.monotonic()
    while (answer := await asyncio.to_thread(_get, port)) != want:
        assert time.monotonic() - started < timeout, answer
        await asyncio.sleep(0.05)
    return time.monotonic() - started


def test_nginx_resolver_follows_endpoint_changes_without_reload(tmp_path: Path) -> None:
    http_port, backend_port = _free_port(), _free_port()

    async def scenario() -> dict[str, float]:
        zone = Zone()
        dns = DnsServer(zone)
        dns_port = await dns.start()
        # The same resolver directive angie.conf gets.
        angie_conf = AngieRenderer().main(main_config(tmp_path), dns_port)
        resolver = re.search(r"^ *resolver .*;$", angie_conf, re.M)
        assert resolver is not None
        (tmp_path / "nginx.conf").write_text(
            f"pid {tmp_path}/nginx.pid;\n"
            "error_log stderr notice;\n"
            "worker_processes 2;\n"
            "events {}\n"
            "http {\n"
            "    access_log off;\n"
            f"{resolver.group(0)}\n"
            f"    server {{\n"
            f"        listen 127.0.0.1:{http_port};\n"
            "        location / {\n"
            f"            set $backend {backend_dns_name(BACKEND)};\n"
            f"            proxy_pass http://$backend:{backend_port};\n"
            "        }\n"
            "    }\n"
            "}\n"
        )
        runners = []
        for address, text in [("127.0.0.1", "one"), ("127.0.0.2", "two")]:
            app = web.Application()

            async def answer(_: web.Request, text: str = text) -> web.Response:
                return web.Response(text=text)

            app.router.add_get("/", answer)
            runner = web.AppRunner(app)
            await runner.setup()
            await web.TCPSite(runner, address, backend_port).start()
            runners.append(runner)
        zone.set_endpoints({BACKEND: [("127.0.0.1", backend_port)]})
        nginx = await asyncio.create_subprocess_exec(
            *("nginx", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")),
            *("-e", "stderr", "-g", "daemon off;"),
            stderr=subprocess.DEVNULL,
        )
        timings: dict[str, float] = {}
        try:
            await _until(http_port, (200, "one"))
            workers = _workers(nginx.pid)
            zone.set_endpoints({BACKEND: [("127.0.0.2", backend_port)]})
            timings["moved"] = await _until(http_port, (200, "two"))
            # No endpoints: the name has no address any more; NGINX answers 502.
            zone.set_endpoints({BACKEND: []})
            timings["emptied"] = await _until(http_port, (502, ""))
            zone.set_endpoints({BACKEND: [("127.0.0.1", backend_port)]})
            timings["back"] = await _until(http_port, (200, "one"))
            # The same workers all along: no reload happened.
            assert _workers(nginx.pid) == workers
        finally:
            nginx.terminate()
            await nginx.wait()
            for runner in runners:
                await runner.cleanup()
            await dns.stop()
        return timings

    timings = asyncio.run(scenario())
    # resolver valid=1s: NGINX caches an answer for 1 s, then asks again.
    assert all(seconds < 3 for seconds in timings.values()), timings
