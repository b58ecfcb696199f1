"""TransportServers: what ngx_stream_ferryman_module costs a TCP connection, and how
fast an endpoint change reaches a TCP listener (no reload).

    FERRYMAN_TEST_NGINX_MODULES_DIR=... .venv/bin/python -m bench.stream_endpoints \\
        [--connections 2000] [--switches 20]

One ferryman with a GlobalConfiguration listener and a TransportServer to a loopback
TCP echo server. Prints connections per second (connect, send, receive, close; one
at a time) direct to the backend and through the listener, and the median and worst
time from rewriting the EndpointSlice to the first connection that reaches the new
backend, with the reload count before and after (it must not move).
"""

from __future__ import annotations

import argparse
import socket
import socketserver
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.processes import Ferryman, free_port, write_yaml


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        data = self.request.recv(4096)
        self.request.sendall(self.server.name + data)  # type: ignore[attr-defined]


def _echo(name: bytes) -> int:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    server.name = name  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return int(server.server_address[1])


def _ask(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"x")
        return s.recv(4096)


def _rate(port: int, n: int) -> float:
    started = time.monotonic()
    for _ in range(n):
        _ask(port)
    return n / (time.monotonic() - started)


def _docs(listener_port: int, backend_port: int) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "k8s.nginx.org/v1",
            "kind": "GlobalConfiguration",
            "metadata": {"name": "gc", "namespace": "default"},
            "spec": {"listeners": [{"name": "echo", "port": listener_port, "protocol": "TCP"}]},
        },
        {
            "apiVersion": "k8s.nginx.org/v1",
            "kind": "TransportServer",
            "metadata": {"name": "echo", "namespace": "default"},
            "spec": {
                "listener": {"name": "echo", "protocol": "TCP"},
                "upstreams": [{"name": "a", "service": "echo", "port": 80}],
                "action": {"pass": "a"},
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "echo", "namespace": "default"},
            "spec": {"ports": [{"port": 80, "name": "p"}]},
        },
    ]


def _slice(backend_port: int) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": "echo-1",
                "namespace": "default",
                "labels": {"kubernetes.io/service-name": "echo"},
            },
            "addressType": "IPv4",
            "ports": [{"name": "p", "port": backend_port}],
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
        }
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--connections", type=int, default=2000)
    ap.add_argument("--switches", type=int, default=20)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ferryman-stream-"))
    listener = free_port()
    backends = [_echo(b"a:"), _echo(b"b:")]
    f = Ferryman(work, extra_args=["--global-configuration", "default/gc"])
    write_yaml(f.manifests / "ts.yaml", _docs(listener, backends[0]))
    write_yaml(f.manifests / "slice.yaml", _slice(backends[0]))
    f.start()
    try:
        direct = _rate(backends[0], args.connections)
        through = _rate(listener, args.connections)
        print(f"connections/s direct {direct:.0f}, through the listener {through:.0f}")
        reloads = f.reloads()
        waits = []
        for i in range(args.switches):
            want = b"b:x" if i % 2 == 0 else b"a:x"
            started = time.monotonic()
            write_yaml(f.manifests / "slice.yaml", _slice(backends[(i + 1) % 2]))
            while _ask(listener) != want:
                time.sleep(0.005)
            waits.append(time.monotonic() - started)
        print(
            f"endpoint switch to traffic: median {statistics.median(waits) * 1000:.0f} ms, "
            f"worst {max(waits) * 1000:.0f} ms over {len(waits)}; "
            f"reloads before {reloads}, after {f.reloads()}"
        )
    finally:
        f.stop()


if __name__ == "__main__":
    main()
