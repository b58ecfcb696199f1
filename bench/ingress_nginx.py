"""What an ingress-nginx route costs through ferryman: rewrite-target with a
capture group, a canary by header and a source allowlist on one route, against
a hand-written NGINX configuration doing the same (issue 30's goal: >= 0.95).

    .venv/bin/python -m bench.ingress_nginx [--seconds 1] [--rounds 40]

ferryman: an Ingress ``inn.bench.test`` with ``use-regex``, ``rewrite-target:
/$2`` on ``/p0(/|$)(.*)`` and ``whitelist-source-range: 127.0.0.0/8`` to the
backend's first port, and its canary Ingress (``canary-by-header: X-Canary``)
to the second. Hand-written: the same as NGINX users write it (a map on the
header choosing the upstream, allow/deny, ``rewrite ... break``). wrk ``-t2
-c64``, the plain requests (main) and ``X-Canary: always`` ones (canary), each
side back to back per round with the order rotating; ratios are medians of the
rounds'; NGINX's CPU per request is the cost behind them. Rounds are one-second
slices by default: background load on a shared machine moves within seconds, and
with 5 s slices the same code measured canary ratios from 0.87 to 1.07.
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
    median_ratio,
    write_yaml,
    wrk,
)
from bench.run import PROXY_HEADERS, WARM_UP_SECONDS, hand_written_nginx

HOST = "inn.bench.test"
P = "nginx.ingress.kubernetes.io/"
PATH = "/p0(/|$)(.*)"


def _ingress(name: str, service: str, annotations: dict[str, str]) -> dict[str, Any]:
    rule = {
        "host": HOST,
        "http": {
            "paths": [
                {
                    "path": PATH,
                    "pathType": "ImplementationSpecific",
                    "backend": {"service": {"name": service, "port": {"number": 80}}},
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


def _service(name: str, port: int) -> list[dict[str, Any]]:
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"ports": [{"port": 80, "name": "http"}]},
    }
    return [svc, *endpoint_slices(name, (port,))]


def docs(ports: tuple[int, int]) -> list[dict[str, Any]]:
    main = {
        P + "use-regex": "true",
        P + "rewrite-target": "/$2",
        P + "whitelist-source-range": "127.0.0.0/8",
    }
    canary = {P + "canary": "true", P + "canary-by-header": "X-Canary"}
    return [
        _ingress("main", "main", main),
        _ingress("canary", "canary", canary),
        *_service("main", ports[0]),
        *_service("canary", ports[1]),
    ]


def _hand_written_http(port: int, ports: tuple[int, int]) -> str:
    return f"""    map $http_x_canary $bench_upstream {{
        always canary;
        default main;
    }}
    upstream main {{
        server 127.0.0.1:{ports[0]};
        keepalive 64;
    }}
    upstream canary {{
        server 127.0.0.1:{ports[1]};
        keepalive 64;
    }}
    server {{
        listen 127.0.0.1:{port} reuseport;
        server_name {HOST};
        location ~* "^/p0(/|$)(.*)" {{
            allow 127.0.0.0/8;
            deny all;
            rewrite "(?i)/p0(/|$)(.*)" /$2 break;
            proxy_pass http://$bench_upstream;{PROXY_HEADERS}
        }}
    }}"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seconds", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=40)
    args = ap.parse_args()
    with bench_bed("fbench-inn-") as (work, backends, f):
        ports = (backends.ports[0], backends.ports[1])
        write_yaml(f.manifests / "inn.yaml", docs(ports))
        f.start()
        port = free_port()
        plain = hand_written_nginx(work, port, _hand_written_http(port, ports), (HOST, "/p0/x"))
        master = int((f.workdir / "state" / "nginx.pid").read_text())
        sides = {"ferryman": (f.http_port, master), "hand_written": (port, plain.pid)}
        kinds = {"main": (), "canary": ("X-Canary: always",)}
        try:
            for side_port, _ in sides.values():
                wrk(f"http://127.0.0.1:{side_port}/p0/x", HOST, WARM_UP_SECONDS)
            targets = [(s, k) for s in sides for k in kinds]
            rps: dict[tuple[str, str], list[float]] = {t: [] for t in targets}
            cpu_us: dict[tuple[str, str], list[float]] = {t: [] for t in targets}
            for i in range(args.rounds):
                for side, kind in alternating(targets, i):
                    side_port, pid = sides[side]
                    before = cpu_seconds(pid)
                    run = wrk(
                        f"http://127.0.0.1:{side_port}/p0/x",
                        HOST,
                        args.seconds,
                        headers=kinds[kind],
                    )
                    used = cpu_seconds(pid) - before
                    if run["non_2xx"]:
                        raise RuntimeError(f"{side} {kind}: {run['non_2xx']:.0f} non-2xx answers")
                    rps[(side, kind)].append(run["rps"])
                    cpu_us[(side, kind)].append(used / (run["rps"] * args.seconds) * 1e6)
            print(f"reloads: {f.reloads()}")
            for kind in kinds:
                ours, theirs = rps[("ferryman", kind)], rps[("hand_written", kind)]
                ratio, low, high = median_ratio(ours, theirs)
                # Throughput at NGINX's saturation goes as 1 / its CPU per request:
                # the same comparison, free of how wrk and the backend got the cores.
                cost, _, _ = median_ratio(
                    cpu_us[("hand_written", kind)], cpu_us[("ferryman", kind)]
                )
                print(
                    f"{kind}: ferryman {statistics.median(ours):.0f} req/s, hand-written "
                    f"{statistics.median(theirs):.0f} req/s, ratio {ratio:.3f} (90% interval "
                    f"{low:.3f}-{high:.3f}); NGINX CPU "
                    f"{statistics.median(cpu_us[('ferryman', kind)]):.1f} vs "
                    f"{statistics.median(cpu_us[('hand_written', kind)]):.1f} us/request "
                    f"(hand-written/ferryman {cost:.3f})"
                )
        finally:
            plain.terminate()
            plain.wait(10)


if __name__ == "__main__":
    main()
