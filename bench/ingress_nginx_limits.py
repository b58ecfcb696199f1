"""What ingress-nginx's limits cost through ferryman: limit-rps alone, and
limit-rps with limit-connections and a limit-allowlist the client is not on,
against a hand-written NGINX configuration doing the latter as ingress-nginx
writes it (geo + map to the key, limit_req and limit_conn).

    .venv/bin/python -m bench.ingress_nginx_limits [--seconds 5] [--rounds 6]

ferryman: ``rps.bench.test`` (limit-rps only) and ``lim.bench.test`` (limit-rps,
limit-connections and limit-allowlist: 10.0.0.0/8), both on the Lua slow path,
to the same backend; the rate, burst and connection limit are far above what
a run reaches (every request is counted, none refused). wrk ``-t2 -c64``, each
side back to back per round with the order rotating; ratios are medians of the
rounds'; NGINX's CPU per request is the cost behind them.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from bench.processes import (
    alternating,
    bench_bed,
    cpu_seconds,
    endpoint_slices,
    free_port,
    write_yaml,
    wrk,
)
from bench.run import PROXY_HEADERS, WARM_UP_SECONDS, hand_written_nginx

P = "nginx.ingress.kubernetes.io/"
RATE = 100000  # requests per second: beyond any run on this machine
CONNECTIONS = 1000  # beyond wrk's 64


def _ingress(name: str, host: str, annotations: dict[str, str]) -> dict[str, Any]:
    rule = {
        "host": host,
        "http": {
            "paths": [
                {
                    "path": "/p0",
                    "pathType": "Prefix",
                    "backend": {"service": {"name": "app", "port": {"number": 80}}},
                }
            ]
        },
    }
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {"ingressClassName": "ferryman", "rules": [rule]},
    }


def docs(port: int) -> list[dict[str, Any]]:
    rps = {P + "limit-rps": str(RATE)}
    limits = {
        **rps,
        P + "limit-connections": str(CONNECTIONS),
        P + "limit-allowlist": "10.0.0.0/8",
    }
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "app", "namespace": "default"},
        "spec": {"ports": [{"port": 80, "name": "http"}]},
    }
    return [
        _ingress("rps", "rps.bench.test", rps),
        _ingress("lim", "lim.bench.test", limits),
        svc,
        *endpoint_slices("app", (port,)),
    ]


def _hand_written_http(port: int, backend: int) -> str:
    # ingress-nginx's: the key is the address unless the client is allowed.
    return f"""    geo $remote_addr $bench_allowed {{
        default 0;
        10.0.0.0/8 1;
    }}
    map $bench_allowed $bench_key {{
        0 $binary_remote_addr;
        1 "";
    }}
    limit_req_zone $bench_key zone=bench_rps:5m rate={RATE}r/s;
    limit_conn_zone $bench_key zone=bench_conn:5m;
    upstream app {{
        server 127.0.0.1:{backend};
        keepalive 64;
    }}
    server {{
        listen 127.0.0.1:{port} reuseport;
        server_name lim.bench.test;
        location /p0 {{
            limit_req zone=bench_rps burst={RATE * 5} nodelay;
            limit_req_status 503;
            limit_conn bench_conn {CONNECTIONS};
            limit_conn_status 503;
            proxy_pass http://app;{PROXY_HEADERS}
        }}
    }}"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    with bench_bed("fbench-lim-") as (work, backends, f):
        write_yaml(f.manifests / "lim.yaml", docs(backends.ports[0]))
        f.start()
        port = free_port()
        http = _hand_written_http(port, backends.ports[0])
        plain = hand_written_nginx(work, port, http, ("lim.bench.test", "/p0/x"))
        master = int((f.workdir / "state" / "nginx.pid").read_text())
        targets = {
            "ferryman limit-rps": (f.http_port, master, "rps.bench.test"),
            "ferryman all three": (f.http_port, master, "lim.bench.test"),
            "hand-written all three": (port, plain.pid, "lim.bench.test"),
        }
        try:
            for side_port, _, host in targets.values():
                wrk(f"http://127.0.0.1:{side_port}/p0/x", host, WARM_UP_SECONDS)
            rps: dict[str, list[float]] = {t: [] for t in targets}
            cpu_us: dict[str, list[float]] = {t: [] for t in targets}
            for i in range(args.rounds):
                for name in alternating(list(targets), i):
                    side_port, pid, host = targets[name]
                    before = cpu_seconds(pid)
                    run = wrk(f"http://127.0.0.1:{side_port}/p0/x", host, args.seconds)
                    used = cpu_seconds(pid) - before
                    if run["non_2xx"]:
                        raise RuntimeError(f"{name}: {run['non_2xx']:.0f} non-2xx answers")
                    rps[name].append(run["rps"])
                    cpu_us[name].append(used / (run["rps"] * args.seconds) * 1e6)
            print(f"reloads: {f.reloads()}")
            base = rps["hand-written all three"]
            for name in targets:
                ratio = statistics.median(a / b for a, b in zip(rps[name], base, strict=True))
                print(
                    f"{name}: {statistics.median(rps[name]):.0f} req/s, ratio to hand-written "
                    f"{ratio:.3f}; NGINX CPU {statistics.median(cpu_us[name]):.1f} us/request"
                )
        finally:
            plain.terminate()
            plain.wait(10)


if __name__ == "__main__":
    main()
