"""ferryman's benchmark suite: real NGINX, real loopback backends, manifests mode.

    ./scripts/bench.sh [--sizes 100,1000,10000] [--samples 30] [--out bench/results]

Writes ``latest.json`` and ``latest.png`` under ``--out``. Scenarios:

* startup(N): N Ingresses (own host, 3 paths, own Service with 2 endpoints):
  seconds to ready (and the controller's CPU seconds until then), reloads,
  controller RSS, NGINX PSS/RSS;
* time-to-route(N): with N live, add one Ingress; seconds to its first 200 (p50/p99)
  (both on each server of ``--data-planes``);
* endpoint churn: 1,000 endpoint changes (10 rounds of 100 Services): reloads
  and seconds until traffic follows (on each server of ``--data-planes``);
* batch: 1,000 Ingress files written at once: reloads, seconds to all routable;
* throughput: wrk through ferryman vs a hand-written NGINX config for the same
  route, in the same run, as a ratio; then the same on each other server of
  ``--data-planes`` against a hand-written config run by that server;
* reloads(N), per server (``--data-planes nginx,nginx-1.30,angie``): N
  Ingresses at start-up: start-up reloads and the start-up reload's time; then
  one Ingress added: the reloads it took (none on any server) and its time to
  route.

``--scenarios`` picks some of startup, churn, batch, throughput, reloads.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.processes import (
    BackendNginx,
    Ferryman,
    compile_bytecode,
    dump,
    free_port,
    get,
    ingress_docs,
    process_cpu_seconds,
    when_and_where,
    write_yaml,
)

POOL = 8  # backend ports; Service i uses two of them
WARM_UP_SECONDS = 3


def _ports(i: int, backends: BackendNginx) -> tuple[int, int]:
    p = backends.ports
    return p[i % POOL], p[(i + 1) % POOL]


def _wait(check: Callable[[], bool], timeout: float, what: str, interval: float = 0.005) -> float:
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(interval)
    return time.monotonic() - started


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def startup_and_route(
    n: int, samples: int, backends: BackendNginx, work: Path, server: str = "nginx"
) -> dict[str, Any]:
    f = Ferryman(work / f"n{n}-{server}", flavour=server)
    for i in range(n):
        write_yaml(f.manifests / f"app{i}.yaml", ingress_docs(i, _ports(i, backends)))
    ready = f.start()
    try:
        assert f.proc is not None
        result: dict[str, Any] = {
            "ingresses": n,
            "ready_s": round(ready, 3),
            "controller_cpu_to_ready_s": round(process_cpu_seconds(f.proc.pid), 2),
            "its_ended_children_cpu_s": round(process_cpu_seconds(f.proc.pid, children=True), 2),
        }
        result["reloads"] = f.reloads()
        m = f.metrics()
        result["reload_ms"] = m["nginx_ingress_controller_nginx_last_reload_milliseconds"]
        status, _ = f.request(f"app{n - 1}.bench.test", "/p2/x")
        result["last_route_status"] = status
        result.update({k: round(v, 1) for k, v in f.memory().items()})
        ttr = []
        for s in range(samples):
            i = n + s
            host = f"app{i}.bench.test"
            started = time.monotonic()
            write_yaml(f.manifests / f"app{i}.yaml", ingress_docs(i, _ports(i, backends)))
            _wait(lambda h=host: f.request(h, "/p0")[0] == 200, 60, host)  # type: ignore[misc]
            ttr.append(time.monotonic() - started)
        result["time_to_route_p50_s"] = round(statistics.median(ttr), 3)
        result["time_to_route_p99_s"] = round(_percentile(ttr, 0.99), 3)
        result["reloads_for_new_ingresses"] = f.reloads() - result["reloads"]
        return result
    finally:
        f.stop()


def reloads(n: int, flavour: str, backends: BackendNginx, work: Path) -> dict[str, Any]:
    f = Ferryman(work / f"reloads-{flavour}-{n}", flavour=flavour)
    for i in range(n):
        write_yaml(f.manifests / f"app{i}.yaml", ingress_docs(i, _ports(i, backends)))
    ready = f.start()
    try:
        m = f.metrics()
        result: dict[str, Any] = {
            "data_plane": flavour,
            "ingresses": n,
            "ready_s": round(ready, 3),
            "startup_reloads": f.reloads(),
            "startup_reload_ms": m["nginx_ingress_controller_nginx_last_reload_milliseconds"],
        }
        before = f.reloads()
        host = f"app{n}.bench.test"
        started = time.monotonic()
        write_yaml(f.manifests / f"app{n}.yaml", ingress_docs(n, _ports(n, backends)))
        _wait(lambda: f.request(host, "/p0")[0] == 200, 300, host, interval=0.02)
        result["add_one_route_s"] = round(time.monotonic() - started, 3)
        result["add_one_reloads"] = f.reloads() - before
        if result["add_one_reloads"]:
            m = f.metrics()
            result["add_one_reload_ms"] = m[
                "nginx_ingress_controller_nginx_last_reload_milliseconds"
            ]
        return result
    finally:
        f.stop()


def endpoint_churn(
    backends: BackendNginx, work: Path, services: int = 1000, server: str = "nginx"
) -> dict[str, Any]:
    f = Ferryman(work / f"churn-{server}", flavour=server)
    for i in range(services):
        write_yaml(f.manifests / f"app{i}.yaml", ingress_docs(i, (backends.ports[i % POOL],) * 1))
    f.start()
    try:
        reloads = f.reloads()
        rounds, per_round = 10, 100
        follow = []
        for r in range(rounds):
            changed = range(r * per_round, (r + 1) * per_round)
            target = {i: backends.ports[(i + r + 1) % POOL] for i in changed}
            started = time.monotonic()
            for i in changed:
                docs = ingress_docs(i, (target[i],))
                write_yaml(f.manifests / f"app{i}.yaml", docs)
            for i in changed:
                host = f"app{i}.bench.test"
                want = str(target[i])
                _wait(
                    lambda h=host, w=want: f.request(h, "/p0")[1].strip() == w,  # type: ignore[misc]
                    30,
                    host,
                )
            follow.append(time.monotonic() - started)
        return {
            "endpoint_changes": rounds * per_round,
            "reloads": f.reloads() - reloads,
            "follow_p50_s": round(statistics.median(follow), 3),
            "follow_max_s": round(max(follow), 3),
        }
    finally:
        f.stop()


def batch(backends: BackendNginx, work: Path, n: int = 1000) -> dict[str, Any]:
    f = Ferryman(work / "batch")
    f.start()
    try:
        staging = work / "batch-staging"
        staging.mkdir()
        for i in range(n):
            write_yaml(staging / f"app{i}.yaml", ingress_docs(i, _ports(i, backends)))
        before = f.reloads()
        started = time.monotonic()
        for p in staging.iterdir():
            p.rename(f.manifests / p.name)
        for i in range(n):
            _wait(lambda h=f"app{i}.bench.test": f.request(h, "/p1")[0] == 200, 60, "batch")  # type: ignore[misc]
        return {
            "ingresses": n,
            "reloads": f.reloads() - before,
            "all_routable_s": round(time.monotonic() - started, 3),
        }
    finally:
        f.stop()


# What a location sets to proxy as NGINX users write it by hand (and ferryman does).
PROXY_HEADERS = """
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_set_header X-Real-IP $remote_addr;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;"""


def hand_written_nginx(
    work: Path, port: int, http: str, probe: tuple[str, str], binary: str = "nginx"
) -> subprocess.Popen[bytes]:
    """The baseline ferryman is measured against: NGINX (or ``binary``, the same
    server ferryman runs) with ``http`` in its http block as users write it,
    started once ``probe`` (host, path) answers 200."""
    d = work / "handwritten"
    (d / "tmp").mkdir(parents=True, exist_ok=True)
    (d / "nginx.conf").write_text(
        f"""
worker_processes 2;
pid {d}/nginx.pid;
error_log stderr error;
events {{ worker_connections 16384; }}
http {{
    access_log off;
    proxy_temp_path {d}/tmp;
{http}
}}
"""
    )
    # Its own session, as ferryman's NGINX has and a service manager would give
    # it: with the kernel's autogroup scheduling, a session is a scheduling
    # group, and sharing wrk's would favour this side.
    proc = subprocess.Popen(
        [binary, "-p", str(d), "-c", str(d / "nginx.conf"), "-e", "stderr", "-g", "daemon off;"],
        start_new_session=True,
    )
    host, path = probe
    _wait(lambda: get(f"http://127.0.0.1:{port}{path}", host)[0] == 200, 10, "nginx")
    return proc


def _hand_written(
    work: Path, port: int, backends: tuple[int, int], binary: str = "nginx"
) -> subprocess.Popen[bytes]:
    http = f"""    upstream app {{
        server 127.0.0.1:{backends[0]};
        server 127.0.0.1:{backends[1]};
        keepalive 64;
    }}
    server {{
        listen 127.0.0.1:{port} reuseport;
        server_name app0.bench.test;
        location /p0 {{
            proxy_pass http://app;{PROXY_HEADERS}
        }}
    }}"""
    return hand_written_nginx(work, port, http, ("app0.bench.test", "/p0"), binary)


def throughput(
    backends: BackendNginx, work: Path, seconds: int, rounds: int, server: str = "nginx"
) -> dict[str, Any]:
    """wrk through ferryman and through the hand-written config on the same
    ``server`` (bench.processes.server_args), back to back in each round (order
    alternating), so both meet the same background load; the ratio is the
    median of the rounds' ratios, since a 2-core VM's single runs vary by ±10%.
    NGINX CPU per request is the cost behind the ratio."""
    from bench.processes import cpu_seconds, server_binary, wrk

    f = Ferryman(work / f"throughput-{server}", flavour=server)
    write_yaml(f.manifests / "app0.yaml", ingress_docs(0, _ports(0, backends)))
    f.start()
    port = free_port()
    plain = _hand_written(work / server, port, _ports(0, backends), server_binary(server))
    targets = {
        "ferryman": (f.http_port, int((f.workdir / "state" / "nginx.pid").read_text())),
        "hand_written": (port, plain.pid),
    }
    try:
        # Not recorded: right after start-up both sides ran measurably slower
        # (caches, fresh workers), and round 1 would carry that.
        for target_port, _ in targets.values():
            wrk(f"http://127.0.0.1:{target_port}/p0/x", "app0.bench.test", WARM_UP_SECONDS)
        rps: dict[str, list[float]] = {name: [] for name in targets}
        cpu_us: dict[str, list[float]] = {name: [] for name in targets}
        ratios = []
        for i in range(rounds):
            for name in sorted(targets, reverse=i % 2 == 1):
                target_port, master = targets[name]
                before = cpu_seconds(master)
                run = wrk(f"http://127.0.0.1:{target_port}/p0/x", "app0.bench.test", seconds)
                if run["non_2xx"]:
                    raise RuntimeError(f"{name}: {run['non_2xx']:.0f} non-2xx answers")
                rps[name].append(run["rps"])
                cpu_us[name].append((cpu_seconds(master) - before) / (run["rps"] * seconds) * 1e6)
            ratios.append(rps["ferryman"][-1] / rps["hand_written"][-1])
        return {
            "ferryman_rps": round(statistics.median(rps["ferryman"])),
            "hand_written_rps": round(statistics.median(rps["hand_written"])),
            "ratio": round(statistics.median(ratios), 3),
            "round_ratios": [round(r, 3) for r in ratios],
            "nginx_cpu_us_per_request": {
                name: round(statistics.median(v), 2) for name, v in cpu_us.items()
            },
            "wrk": f"-t2 -c64 -d{seconds}s, {rounds} rounds of one run each, order alternating, "
            f"after a {WARM_UP_SECONDS}s warm-up of each",
        }
    finally:
        plain.terminate()
        plain.wait(10)
        f.stop()


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = results["startup"]
    ns = [r["ingresses"] for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    axes[0].plot(ns, [r["ready_s"] for r in rows], "o-")
    axes[0].set(xscale="log", xlabel="Ingresses", ylabel="seconds", title="Start to ready")
    axes[1].plot(ns, [r["time_to_route_p50_s"] for r in rows], "o-", label="p50")
    axes[1].plot(ns, [r["time_to_route_p99_s"] for r in rows], "o-", label="p99")
    axes[1].set(
        xscale="log", xlabel="Ingresses live", ylabel="seconds", title="New Ingress to first 200"
    )
    axes[1].legend()
    axes[2].plot(ns, [r["controller_rss_mb"] for r in rows], "o-", label="controller RSS")
    axes[2].plot(ns, [r["nginx_pss_mb"] for r in rows], "o-", label="NGINX PSS")
    axes[2].set(xscale="log", xlabel="Ingresses", ylabel="MB", title="Memory")
    axes[2].legend()
    fig.suptitle(f"ferryman bench — {results['when']} — {results['machine']}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="100,1000,10000")
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--seconds", type=int, default=5, help="wrk duration per run")
    ap.add_argument("--rounds", type=int, default=8, help="throughput rounds")
    ap.add_argument("--out", type=Path, default=Path("bench/results"))
    ap.add_argument("--scenarios", default="startup,churn,batch,throughput,reloads")
    ap.add_argument("--reload-sizes", default="1000,10000", help="Ingresses for reloads(N)")
    ap.add_argument(
        "--data-planes",
        default="nginx,nginx-1.30,angie",
        help="servers for startup, reloads(N), throughput and endpoint churn",
    )
    args = ap.parse_args()
    scenarios = set(args.scenarios.split(","))
    compile_bytecode()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fbench-", dir="/tmp") as tmp:
        work = Path(tmp)
        backends = BackendNginx(work / "backends", [free_port() for _ in range(POOL)])
        try:
            results: dict[str, Any] = {
                **when_and_where(),
                "startup": [],
            }
            for n in (int(x) for x in args.sizes.split(",") if "startup" in scenarios):
                print(f"startup + time-to-route, {n} Ingresses ...", flush=True)
                results["startup"].append(startup_and_route(n, args.samples, backends, work))
                print(results["startup"][-1], flush=True)
                for server in args.data_planes.split(","):
                    if server != "nginx":
                        print(f"startup + time-to-route, {server}, {n} Ingresses ...", flush=True)
                        row = startup_and_route(n, args.samples, backends, work, server)
                        results.setdefault("startup_servers", {}).setdefault(server, []).append(row)
                        print(row, flush=True)
            if "churn" in scenarios:
                print("endpoint churn ...", flush=True)
                results["endpoint_churn"] = endpoint_churn(backends, work)
                print(results["endpoint_churn"], flush=True)
                for server in args.data_planes.split(","):
                    if server != "nginx":
                        print(f"endpoint churn, {server} ...", flush=True)
                        row = endpoint_churn(backends, work, server=server)
                        results.setdefault("endpoint_churn_servers", {})[server] = row
                        print(row, flush=True)
            if "batch" in scenarios:
                print("batch ...", flush=True)
                results["batch"] = batch(backends, work)
                print(results["batch"], flush=True)
            if "throughput" in scenarios:
                print("throughput ...", flush=True)
                results["throughput"] = throughput(backends, work, args.seconds, args.rounds)
                print(results["throughput"], flush=True)
                # The same against each other server's own hand-written configuration.
                for server in args.data_planes.split(","):
                    if server != "nginx":
                        print(f"throughput, {server} ...", flush=True)
                        row = throughput(backends, work, args.seconds, args.rounds, server)
                        results.setdefault("throughput_servers", {})[server] = row
                        print(row, flush=True)
            if "reloads" in scenarios:
                results["reloads"] = []
                for n in (int(x) for x in args.reload_sizes.split(",")):
                    for flavour in args.data_planes.split(","):
                        print(f"reloads, {flavour}, {n} Ingresses ...", flush=True)
                        results["reloads"].append(reloads(n, flavour, backends, work))
                        print(results["reloads"][-1], flush=True)
        finally:
            backends.stop()
    dump(args.out / "latest.json", results)
    print(f"wrote {args.out / 'latest.json'}")
    if results["startup"]:
        plot(results, args.out / "latest.png")
        print(f"wrote {args.out / 'latest.png'}")


if __name__ == "__main__":
    main()
