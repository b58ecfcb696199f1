"""Routing cost with many routes on one host: the per-request time of a host
with ``--routes`` Prefix paths against a host with one, through ferryman's fast
path (the module, or Lua with a modules folder without it).

    .venv/bin/python -m bench.many_routes [--routes 100000] [--requests 3000]
        [--nginx-modules-dir DIR]

Requests go one at a time over one keep-alive connection, alternating between
the two hosts; the difference of the medians is what routing the large host
costs per request (client and backend costs are the same for both).
"""

from __future__ import annotations

import argparse
import socket
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.processes import BackendNginx, Ferryman, endpoint_slices, free_port, write_yaml


def _ingress(name: str, host: str, paths: list[str]) -> dict[str, Any]:
    backend = {"service": {"name": "app", "port": {"number": 80}}}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "ingressClassName": "ferryman",
            "rules": [
                {
                    "host": host,
                    "http": {
                        "paths": [
                            {"path": p, "pathType": "Prefix", "backend": backend} for p in paths
                        ]
                    },
                }
            ],
        },
    }


def _timed_request(sock: socket.socket, host: str, path: str) -> float:
    started = time.perf_counter()
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    answer = b""
    while not answer.endswith(b"\n") or b"\r\n\r\n" not in answer:
        answer += sock.recv(65536)
    elapsed = time.perf_counter() - started
    assert answer.startswith(b"HTTP/1.1 200"), answer[:100]
    return elapsed


def run(routes: int, requests: int, modules_dir: str | None) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="fbench-routes-", dir="/tmp") as tmp:
        work = Path(tmp)
        backend = BackendNginx(work / "backend", [free_port()])
        extra = ["--nginx-modules-dir", modules_dir] if modules_dir else []
        f = Ferryman(work / "ferryman", extra_args=extra)
        try:
            service = {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "app", "namespace": "default"},
                "spec": {"ports": [{"port": 80, "name": "http"}]},
            }
            many = [f"/r{i}" for i in range(routes)] + ["/"]
            write_yaml(
                f.manifests / "all.yaml",
                [
                    service,
                    *endpoint_slices("app", (backend.ports[0],)),
                    _ingress("many", "many.bench.test", many),
                    _ingress("few", "few.bench.test", ["/"]),
                ],
            )
            f.start()
            times: dict[str, list[float]] = {"many": [], "few": []}
            for first in range(0, requests + 200, 200):
                # A fresh connection per 400 requests: NGINX closes one after
                # keepalive_requests (1000).
                with socket.create_connection(("127.0.0.1", f.http_port), timeout=10) as sock:
                    for i in range(first, min(first + 200, requests + 200)):
                        for name in ("many", "few"):
                            # Unmatched by the /r<i> routes: the root route,
                            # after every look-up the router makes for this path.
                            t = _timed_request(sock, f"{name}.bench.test", f"/zzz/{i}/a/b")
                            if i >= 200:  # warm-up: caches, connections
                                times[name].append(t)
        finally:
            f.stop()
            backend.stop()
    many_us = statistics.median(times["many"]) * 1e6
    few_us = statistics.median(times["few"]) * 1e6
    return {"routes": routes, "many_us": many_us, "few_us": few_us, "cost_us": many_us - few_us}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--routes", type=int, default=100_000)
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--nginx-modules-dir", default=None)
    args = ap.parse_args()
    print(run(args.routes, args.requests, args.nginx_modules_dir))


if __name__ == "__main__":
    main()
