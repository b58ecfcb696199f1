"""1,000 VirtualServers with 5 routes each: start-up, reloads, time-to-route, and
what a split route and a rate-limited route cost against hand-written NGINX.

    .venv/bin/python -m bench.vs_scale [--vs 1000] [--samples 30] [--seconds 5] [--rounds 6]

Each VirtualServer ``vs<i>.bench.test`` has its own Service (two endpoints) and
five routes: ``/p0`` (pass), ``/split`` (50/50 over two upstreams), ``/match``
(a header match, else pass), ``=/exact`` (a return), ``/limited`` (pass, under
a rateLimit Policy of its own namespace, keyed by client address).

- start-up: seconds from spawn to ready with all of them, reloads (the start-up
  one only is expected), NGINX's memory;
- time-to-route: with them live, a new VirtualServer is written; seconds until
  its ``/p0`` answers 200 (p50/p99 of ``--samples``), and the reloads that took;
- throughput: wrk on ``/split`` and on ``/limited`` of one VirtualServer, each
  against a hand-written NGINX configuration doing the same with
  ``split_clients`` and ``limit_req`` (same rate, burst and key). A round gives
  each side ``--seconds`` one-second slices, alternating (the order rotating),
  so that both see the same load from whatever else shares the machine; the
  ratio is the median of the rounds' ratios. The rate is high enough that
  neither side rejects: the cost measured is the accounting, as it is on a
  route that is not over its limit. ``/limited`` is served by
  ngx_http_ferryman_module's own limiter (its only policy is a rate limit).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.processes import (
    Ferryman,
    bench_bed,
    cpu_seconds,
    endpoint_slices,
    free_port,
    write_yaml,
    wrk,
)
from bench.run import PROXY_HEADERS, WARM_UP_SECONDS, _percentile, _wait, hand_written_nginx

RATE = "1000000r/s"  # neither side rejects at the rates 2 cores reach
# One wrk run per slice: background load on a shared machine changes within
# seconds, so the sides alternate at this grain rather than a run each.
SLICE_SECONDS = 1
BURST = 10000  # NGINX counts in whole milliseconds: a burst absorbs one tick's requests


def vs_docs(i: int, ports: tuple[int, int]) -> list[dict[str, Any]]:
    name = f"vs{i}"
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"ports": [{"port": 80, "name": "http"}]},
    }
    policy = {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "Policy",
        "metadata": {"name": f"{name}-limit", "namespace": "default"},
        "spec": {
            "rateLimit": {
                "rate": RATE,
                "burst": BURST,
                "key": "${binary_remote_addr}",
                "zoneSize": "10M",
            }
        },
    }
    split = [
        {"weight": 50, "action": {"pass": "a"}},
        {"weight": 50, "action": {"pass": "b"}},
    ]
    vs = {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "host": f"{name}.bench.test",
            "upstreams": [
                {"name": "a", "service": name, "port": 80},
                {"name": "b", "service": name, "port": 80},
            ],
            "routes": [
                {"path": "/p0", "action": {"pass": "a"}},
                {"path": "/split", "splits": split},
                {
                    "path": "/match",
                    "matches": [
                        {
                            "conditions": [{"header": "X-Canary", "value": "yes"}],
                            "action": {"pass": "b"},
                        }
                    ],
                    "action": {"pass": "a"},
                },
                {"path": "=/exact", "action": {"return": {"code": 200, "body": "exact"}}},
                {
                    "path": "/limited",
                    "policies": [{"name": f"{name}-limit"}],
                    "action": {"pass": "a"},
                },
            ],
        },
    }
    return [service, *endpoint_slices(name, ports), policy, vs]


def _hand_written(work: Path, port: int, backends: tuple[int, int]) -> subprocess.Popen[bytes]:
    """The same two routes as NGINX users write them by hand."""
    proxy = PROXY_HEADERS
    http = f"""    limit_req_zone $binary_remote_addr zone=limit:10m rate={RATE};
    upstream a {{ server 127.0.0.1:{backends[0]}; server 127.0.0.1:{backends[1]}; keepalive 64; }}
    upstream b {{ server 127.0.0.1:{backends[0]}; server 127.0.0.1:{backends[1]}; keepalive 64; }}
    split_clients $request_id $half {{ 50% a; * b; }}
    server {{
        listen 127.0.0.1:{port} reuseport;
        server_name vs0.bench.test;
        location /split {{
            proxy_pass http://$half;{proxy}
        }}
        location /limited {{
            limit_req zone=limit burst={BURST} nodelay;
            proxy_pass http://a;{proxy}
        }}
    }}"""
    return hand_written_nginx(work, port, http, ("vs0.bench.test", "/split"))


def scale(f: Ferryman, n: int, samples: int, ports: tuple[int, int]) -> dict[str, Any]:
    for i in range(n):
        write_yaml(f.manifests / f"vs{i}.yaml", vs_docs(i, ports))
    ready = f.start()
    result: dict[str, Any] = {"virtual_servers": n, "routes_each": 5, "ready_s": round(ready, 3)}
    last = f"vs{n - 1}.bench.test"
    _wait(lambda: f.request(last, "/limited/x")[0] == 200, 120, last, interval=0.05)
    result["startup_reloads"] = f.reloads()
    result.update({k: round(v, 1) for k, v in f.memory().items()})
    ttr = []
    for s in range(samples):
        i = n + s
        host = f"vs{i}.bench.test"
        started = time.monotonic()
        write_yaml(f.manifests / f"vs{i}.yaml", vs_docs(i, ports))
        _wait(lambda h=host: f.request(h, "/p0")[0] == 200, 60, host)  # type: ignore[misc]
        ttr.append(time.monotonic() - started)
    result["time_to_route_p50_s"] = round(statistics.median(ttr), 3)
    result["time_to_route_p99_s"] = round(_percentile(ttr, 0.99), 3)
    result["reloads_after_startup"] = f.reloads() - result["startup_reloads"]
    return result


def throughput(
    f: Ferryman, plain_port: int, plain_pid: int, seconds: int, rounds: int
) -> dict[str, Any]:
    master = int((f.workdir / "state" / "nginx.pid").read_text())
    out: dict[str, Any] = {}
    for path in ("/split", "/limited"):
        targets = {"ferryman": (f.http_port, master), "hand_written": (plain_port, plain_pid)}
        for target_port, _ in targets.values():
            wrk(f"http://127.0.0.1:{target_port}{path}/x", "vs0.bench.test", WARM_UP_SECONDS)
        rps: dict[str, list[float]] = {name: [] for name in targets}
        cpu_us: dict[str, list[float]] = {name: [] for name in targets}
        for i in range(rounds):
            requests = dict.fromkeys(targets, 0.0)
            cpu = dict.fromkeys(targets, 0.0)
            for s in range(seconds):
                for name in sorted(targets, reverse=(i + s) % 2 == 1):
                    target_port, pid = targets[name]
                    before = cpu_seconds(pid)
                    url = f"http://127.0.0.1:{target_port}{path}/x"
                    run = wrk(url, "vs0.bench.test", SLICE_SECONDS)
                    if run["non_2xx"]:
                        raise RuntimeError(f"{name} {path}: {run['non_2xx']:.0f} non-2xx answers")
                    requests[name] += run["rps"] * SLICE_SECONDS
                    cpu[name] += cpu_seconds(pid) - before
            for name in targets:
                rps[name].append(requests[name] / (seconds * SLICE_SECONDS))
                cpu_us[name].append(cpu[name] / requests[name] * 1e6)
        ratios = [a / b for a, b in zip(rps["ferryman"], rps["hand_written"], strict=True)]
        out[path] = {
            "ferryman_rps": round(statistics.median(rps["ferryman"])),
            "hand_written_rps": round(statistics.median(rps["hand_written"])),
            "ratio": round(statistics.median(ratios), 3),
            "nginx_cpu_us_per_request": {
                k: round(statistics.median(v), 1) for k, v in cpu_us.items()
            },
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--vs", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    with bench_bed("fbench-vs-scale-") as (work, backends, f):
        ports = (backends.ports[0], backends.ports[1])
        plain: subprocess.Popen[bytes] | None = None
        try:
            print(scale(f, args.vs, args.samples, ports), flush=True)
            plain_port = free_port()
            plain = _hand_written(work, plain_port, ports)
            for path, row in throughput(
                f, plain_port, plain.pid, args.seconds, args.rounds
            ).items():
                print(path, row, flush=True)
            print(f"reloads at the end: {f.reloads()}")
        finally:
            if plain is not None:
                plain.terminate()
                plain.wait(10)


if __name__ == "__main__":
    main()
