"""The latency ferryman adds: p50/p99/p999 through ferryman and through a
hand-written NGINX configuration for the same route, at fixed request rates
(issue 31 item 4; goal: <= 1.05x at every percentile).

    .venv/bin/python -m bench.latency [--seconds 4] [--rounds 4] [--shapes httproute]
        [--server nginx|nginx-1.30|angie]

Three route shapes, each on both sides (the same server binary, 2 workers;
Debian's NGINX 1.22 unless ``--server``: on 1.22 the Gateway's HTTP listener is
the stream block's h2c hop, which NGINX 1.30 and Angie do not need):

- ``ingress``: an Ingress host ``app0.bench.test`` with a Prefix path ``/p0``
  to a Service with 2 endpoints; hand-written: ``location /p0`` proxying to an
  upstream of the two;
- ``virtualserver_policy``: a VirtualServer ``vs0.bench.test`` routing ``/p0``
  to the same Service, with an accessControl Policy allowing 127.0.0.0/8 (a
  policy other than rate limits: the Lua slow path, kinds/virtualserver/records/
  fast.py); hand-written: the same location with ``allow``/``deny``;
- ``httproute``: an HTTPRoute ``r0.bench.test`` (PathPrefix ``/p0``) on a
  Gateway's HTTP listener (``--enable-gateway-api``); hand-written: the same
  location on a second port.

For each shape, the hand-written side's saturation rate is measured first
(``h2load --h1 -c64``, as fast as it goes); then, per round, each side in turn
(the order alternating by round) gets ``h2load --h1 -c N --rps R/N`` (N = R/90)
for ``--seconds`` at R = each of ``--loads`` (default 10%, 50%, 90%) of it, logging every request
(``--log-file``: start, status, microseconds to the end of the response), and
the percentiles come from those logs. Per shape and load: each side's median
over rounds of its percentiles, and the median over rounds of the per-round
ferryman/hand-written ratio; the achieved rate (logged requests over the main
duration); failed and non-2xx requests; NGINX CPU per request (/proc).
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import subprocess
from pathlib import Path
from typing import Any

from bench.processes import (
    alternating,
    bench_bed,
    cpu_seconds,
    free_port,
    get,
    ingress_docs,
    publish,
    server_binary,
    when_and_where,
    write_yaml,
)
from bench.run import PROXY_HEADERS, _wait, hand_written_nginx

SHAPES = ("ingress", "virtualserver_policy", "httproute")
HOSTS = {"ingress": "app0.bench.test", "virtualserver_policy": "vs0.bench.test"}
HOSTS["httproute"] = "r0.bench.test"
SIDES = ["ferryman", "hand_written"]
PATH = "/p0/x"
# Rate-limited runs: h2load 1.52 held --rps only up to ~100 per client here (its
# per-client timer ticks at most every 10 ms; 32 clients asked for 450/s each
# gave 5,900/s in all), so a rate gets one client per PER_CLIENT requests/s.
PER_CLIENT = 90
SATURATION_CLIENTS = 64
QUANTILES = {"p50": 0.5, "p99": 0.99, "p999": 0.999}


def ferryman_docs(ports: tuple[int, int], gateway_port: int) -> list[dict[str, Any]]:
    """The three shapes' objects, all to Service app0 (two endpoints)."""
    md = {"namespace": "default"}
    policy = {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "Policy",
        "metadata": {"name": "local", **md},
        "spec": {"accessControl": {"allow": ["127.0.0.0/8"]}},
    }
    vs = {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": {"name": "vs0", **md},
        "spec": {
            "host": HOSTS["virtualserver_policy"],
            "policies": [{"name": "local"}],
            "upstreams": [{"name": "app", "service": "app0", "port": 80}],
            "routes": [{"path": "/p0", "action": {"pass": "app"}}],
        },
    }
    gw = "gateway.networking.k8s.io/v1"
    listener = {"name": "http", "port": gateway_port, "protocol": "HTTP"}
    gateway = [
        {
            "apiVersion": gw,
            "kind": "GatewayClass",
            "metadata": {"name": "ferryman"},
            "spec": {"controllerName": "ferryman.io/gateway-controller"},
        },
        {
            "apiVersion": gw,
            "kind": "Gateway",
            "metadata": {"name": "bench", **md},
            "spec": {"gatewayClassName": "ferryman", "listeners": [listener]},
        },
    ]
    route = {
        "apiVersion": gw,
        "kind": "HTTPRoute",
        "metadata": {"name": "r0", **md},
        "spec": {
            "parentRefs": [{"name": "bench"}],
            "hostnames": [HOSTS["httproute"]],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/p0"}}],
                    "backendRefs": [{"name": "app0", "port": 80}],
                }
            ],
        },
    }
    return [*ingress_docs(0, ports, paths=1), policy, vs, *gateway, route]


def hand_written_http(port: int, gateway_port: int, ports: tuple[int, int]) -> str:
    """The same three routes as NGINX users write them: one upstream, a server
    per host, the Gateway's on its own port as a listener of its own."""

    def server(listen: int, host: str, extra: str = "", options: str = " reuseport") -> str:
        return f"""    server {{
        listen 127.0.0.1:{listen}{options};
        server_name {host};
        location /p0 {{{extra}
            proxy_pass http://app;{PROXY_HEADERS}
        }}
    }}"""

    allow = """
            allow 127.0.0.0/8;
            deny all;"""
    return "\n".join(
        [
            f"""    upstream app {{
        server 127.0.0.1:{ports[0]};
        server 127.0.0.1:{ports[1]};
        keepalive 64;
    }}""",
            server(port, HOSTS["ingress"]),
            # A listen's options go on its first server only.
            server(port, HOSTS["virtualserver_policy"], allow, options=""),
            server(gateway_port, HOSTS["httproute"]),
        ]
    )


def h2load(port: int, host: str, seconds: float, rate: float | None, log: Path) -> dict[str, Any]:
    """One h2load run: ``rate`` requests per second in all (None: as fast as
    it goes), after a 1 s warm-up that is neither logged nor counted."""
    clients = math.ceil(rate / PER_CLIENT) if rate else SATURATION_CLIENTS
    cmd = ["h2load", "--h1", f"-c{clients}", "-t1", f"-D{seconds:g}", "--warm-up-time=1"]
    if rate:
        cmd.append(f"--rps={rate / clients:.3f}")
    # h2load writes the log over an old one without truncating it.
    log.unlink(missing_ok=True)
    # The host in the URL, not -H: h2load --h1 sends its own Host header besides
    # one given with -H, and NGINX answers two with 400.
    cmd += [f"--log-file={log}", f"--connect-to=127.0.0.1:{port}", f"http://{host}{PATH}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out = proc.communicate(timeout=seconds + 4)[0]
    except subprocess.TimeoutExpired:
        # h2load 1.52 now and then spins after "Stopped all clients" and never
        # exits (with one thread or two). Its log is complete by then (a line is
        # written as each request ends), so the run counts from the log alone.
        proc.kill()
        out = proc.communicate()[0]
    if proc.returncode and "Stopped all clients" not in out:
        raise RuntimeError(f"h2load exited {proc.returncode}: {out[-600:]}")
    latencies = []
    failed = non_2xx = 0
    for line in log.read_text().splitlines():
        _, status, micros = line.split("\t")[:3]
        if status == "-1":
            failed += 1
        elif not 200 <= int(status) < 300:
            non_2xx += 1
        latencies.append(int(micros))
    latencies.sort()
    result: dict[str, Any] = {
        "rate": len(latencies) / seconds,
        "requests": len(latencies),
        "failed": failed,
        "non_2xx": non_2xx,
        "hung": proc.returncode != 0,
    }
    # Requests h2load gave up on are in its report only (none in the log).
    counts = re.search(r"\d+ succeeded, (\d+) failed, (\d+) errored, (\d+) timeout", out)
    if counts:
        result["failed"] = max(failed, sum(int(counts.group(k)) for k in (1, 2, 3)) - non_2xx)
    for name, q in QUANTILES.items():
        # Nearest rank: the smallest value with at least q of the requests at or below it.
        rank = max(0, math.ceil(len(latencies) * q) - 1)
        result[name] = latencies[rank] if latencies else 0
    return result


def measure(
    sides: dict[str, dict[str, tuple[int, int]]], args: argparse.Namespace, work: Path
) -> dict[str, Any]:
    """Saturation per shape, then the rounds at each of ``--loads`` of it."""
    log = work / "h2load.log"
    saturation = {}
    shapes = args.shapes.split(",")
    for shape in shapes:
        for side in SIDES:  # warm both: upstream keepalive connections, Lua caches
            port, _ = sides[side][shape]
            h2load(port, HOSTS[shape], 1, None, log)
        port, _ = sides["hand_written"][shape]
        runs = [h2load(port, HOSTS[shape], 3, None, log)["rate"] for _ in range(2)]
        saturation[shape] = max(runs)  # the lower one met more of the machine's other work
        print(f"{shape}: hand-written saturation {saturation[shape]:.0f} req/s {runs}", flush=True)
    loads = [float(x) for x in args.loads.split(",")]
    raw: dict[str, dict[str, dict[str, list[dict[str, Any]]]]] = {
        shape: {f"{load:.0%}": {side: [] for side in SIDES} for load in loads} for shape in shapes
    }
    for k in range(args.rounds):
        for shape in shapes:
            for load in loads:
                for side in alternating(SIDES, k):
                    port, master = sides[side][shape]
                    before = cpu_seconds(master)
                    run = h2load(port, HOSTS[shape], args.seconds, load * saturation[shape], log)
                    used = cpu_seconds(master) - before
                    run["nginx_cpu_us"] = round(used / max(run["requests"], 1) * 1e6, 1)
                    raw[shape][f"{load:.0%}"][side].append(run)
        print(f"round {k + 1} of {args.rounds} done", flush=True)
    return {"saturation_rps": saturation, "rows": summarise(raw, saturation), "raw": raw}


def summarise(
    raw: dict[str, dict[str, dict[str, list[dict[str, Any]]]]], saturation: dict[str, float]
) -> list[dict[str, Any]]:
    rows = []
    for shape, loads in raw.items():
        for load, runs in loads.items():
            ours, theirs = runs["ferryman"], runs["hand_written"]
            row: dict[str, Any] = {
                "shape": shape,
                "load": load,
                "target_rps": round(float(load.rstrip("%")) / 100 * saturation[shape]),
            }
            for side, side_runs in runs.items():
                row[side] = {
                    k: statistics.median(r[k] for r in side_runs)
                    for k in ("rate", "nginx_cpu_us", *QUANTILES)
                }
                row[side]["failed"] = sum(r["failed"] for r in side_runs)
                row[side]["non_2xx"] = sum(r["non_2xx"] for r in side_runs)
                row[side]["runs_killed"] = sum(r["hung"] for r in side_runs)
            row["ratio"] = {
                q: round(
                    statistics.median(a[q] / b[q] for a, b in zip(ours, theirs, strict=True)), 3
                )
                for q in QUANTILES
            }
            row["round_ratios"] = {
                q: [round(a[q] / b[q], 2) for a, b in zip(ours, theirs, strict=True)]
                for q in QUANTILES
            }
            rows.append(row)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| shape | load | rate f/h (target) | p50 µs f/h | ratio | p99 µs f/h | ratio "
        "| p999 µs f/h | ratio | CPU µs/req f/h | failed+non-2xx f/h |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        f, h = r["ferryman"], r["hand_written"]
        cells = [
            r["shape"],
            r["load"],
            f"{f['rate']:.0f}/{h['rate']:.0f} ({r['target_rps']})",
        ]
        for q in QUANTILES:
            cells += [f"{f[q]:.0f}/{h[q]:.0f}", f"{r['ratio'][q]:.2f}"]
        cells.append(f"{f['nginx_cpu_us']:.1f}/{h['nginx_cpu_us']:.1f}")
        cells.append(f"{f['failed'] + f['non_2xx']}/{h['failed'] + h['non_2xx']}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seconds", type=float, default=4, help="h2load duration per run")
    ap.add_argument("--rounds", type=int, default=3)
    # 10%: the latency a request adds with little queueing; 50% and 90%: issue 31's loads.
    ap.add_argument("--loads", default="0.1,0.5,0.9", help="fractions of the saturation rate")
    # One shape alone: a change to one shape measured in a third of the time.
    ap.add_argument("--shapes", default=",".join(SHAPES), help=f"some of {', '.join(SHAPES)}")
    # Both sides on one server: Debian's 1.22 (its Gateway HTTP listener is the
    # stream block's h2c hop), or NGINX 1.30 / Angie (h2c of their own, no hop).
    ap.add_argument("--server", default="nginx", choices=("nginx", "nginx-1.30", "angie"))
    args = ap.parse_args()
    unknown = set(args.shapes.split(",")) - set(SHAPES)
    if unknown:
        ap.error(f"unknown shapes: {', '.join(sorted(unknown))}")
    with bench_bed("fbench-lat-", ["--enable-gateway-api"], args.server) as (work, backends, f):
        ports = (backends.ports[0], backends.ports[1])
        gateway_port = free_port()
        write_yaml(f.manifests / "shapes.yaml", ferryman_docs(ports, gateway_port))
        f.start()
        hw_port, hw_gateway_port = free_port(), free_port()
        http = hand_written_http(hw_port, hw_gateway_port, ports)
        plain = hand_written_nginx(
            work, hw_port, http, (HOSTS["ingress"], PATH), server_binary(args.server)
        )
        master = int((f.workdir / "state" / "nginx.pid").read_text())
        sides = {
            "ferryman": {
                "ingress": (f.http_port, master),
                "virtualserver_policy": (f.http_port, master),
                "httproute": (gateway_port, master),
            },
            "hand_written": {
                "ingress": (hw_port, plain.pid),
                "virtualserver_policy": (hw_port, plain.pid),
                "httproute": (hw_gateway_port, plain.pid),
            },
        }
        try:
            # Ready is the Ingress's; the Gateway's listener and routes may follow it.
            for shapes in sides.values():
                for shape, (port, _) in shapes.items():
                    url = f"http://127.0.0.1:{port}{PATH}"
                    _wait(lambda u=url, h=HOSTS[shape]: get(u, h)[0] == 200, 30, shape)  # type: ignore[misc]
            result = measure(sides, args, work)
            result["reloads"] = f.reloads()
        finally:
            plain.terminate()
            plain.wait(10)
    result.update(when_and_where())
    result["command"] = (
        f".venv/bin/python -m bench.latency --seconds {args.seconds:g} --rounds {args.rounds} "
        f"--loads {args.loads}"
        + ("" if args.shapes == ",".join(SHAPES) else f" --shapes {args.shapes}")
    )
    result["h2load"] = (
        f"--h1 -t1 -D{args.seconds:g} --warm-up-time=1; saturation -c{SATURATION_CLIENTS} "
        f"unlimited (best of two 3 s runs); loads -c<rate/{PER_CLIENT}> --rps=<rate/clients>"
    )
    publish(result, table(result["rows"]), Path(__file__).parent / "results" / "latency.json")


if __name__ == "__main__":
    main()
