"""Kubernetes mode at scale: the bench's workload in tools/testapiserver's real
kube-apiserver, and ``ferryman run --kubeconfig`` against it (issue 17).

    .venv/bin/python -m bench.kubernetes [--sizes 100,1000,3000,10000] [--starts 3]
        [--samples 20] [--churn-rounds 10] [--out bench/results/kubernetes.json]

Per size, a fresh API server holding N Ingresses (written into its etcd before
it starts, bench/seeding.py; ``--populate api`` creates them through the API),
each its own host with 3 Prefix paths, its own headless Service and one
EndpointSlice with 2 ready endpoints (two
addresses of a test host: the API server refuses loopback ones, so the backend
NGINX runs in a network namespace of its own, as in tests/kubernetes). Then:

* start -> ready: ``--starts`` fresh ferryman processes, each timed from spawn
  to ``/nginx-ready`` answering 200 (median and each), and the reloads each
  made before ready; the last one goes on for what follows;
* time-to-route: with N live, an Ingress, its Service and its EndpointSlice
  created; seconds to its first 200 (p50/p99 of ``--samples``);
* endpoint churn: rounds of 100 EndpointSlices moved to another backend port;
  reloads, and seconds until all 100 hosts answer from the new port;
* the controller's RSS and NGINX's PSS (master and workers) once ready and
  after the churn, and NGINX's memory as it holds it: private pages, and its
  shared zones' allocated pages counted once (PSS counts a zone's page only in
  processes that touched it: see ``nginx_memory_kib``).

Python's bytecode is compiled first, as the image's pip install does.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.processes import (
    FERRYMAN,
    ROOT,
    BackendNginx,
    children,
    compile_bytecode,
    free_port,
    get,
    ingress_docs,
    nginx_memory_kib,
    process_cpu_seconds,
    pss_kib,
    rss_kib,
)
from bench.seeding import PROBE, seed_seconds, seeded_server

POOL = 8  # backend ports
NET = "10.232"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


class TestHost:
    """A network namespace on a /29 veth link with two backend addresses, and a
    backend NGINX in it answering its port number on each of ``POOL`` ports."""

    def __init__(self, workdir: Path) -> None:
        n = os.getpid() % 30 * 8
        self.netns = f"ferryman-bench-{os.getpid()}"
        self.host_if, self.peer_if = f"fbh{os.getpid()}"[:15], f"fbp{os.getpid()}"[:15]
        self.host_address = f"{NET}.{n >> 8}.{n | 1}"
        self.addresses = (f"{NET}.{n >> 8}.{n | 2}", f"{NET}.{n >> 8}.{n | 3}")
        self.ports: list[int] = []
        while len(self.ports) < POOL:  # the kernel may hand a closed port out twice
            if (port := free_port()) not in self.ports:
                self.ports.append(port)
        self.dir = workdir
        self.nginx: BackendNginx | None = None

    def start(self) -> None:
        _ip("netns", "add", self.netns)
        _ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.peer_if)
        _ip("link", "set", self.peer_if, "netns", self.netns)
        _ip("addr", "add", f"{self.host_address}/29", "dev", self.host_if)
        _ip("link", "set", self.host_if, "up")
        inside = ("netns", "exec", self.netns, "ip")
        for a in self.addresses:
            _ip(*inside, "addr", "add", f"{a}/29", "dev", self.peer_if)
        _ip(*inside, "link", "set", self.peer_if, "up")
        self.nginx = BackendNginx(
            self.dir, self.ports, self.addresses, ("ip", "netns", "exec", self.netns)
        )

    def stop(self) -> None:
        if self.nginx is not None:
            self.nginx.stop()
        subprocess.run(["ip", "link", "del", self.host_if], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.netns], capture_output=True)


def objects(i: int, host: TestHost, port: int) -> list[dict[str, Any]]:
    """Ingress i, its Service and one EndpointSlice with two ready endpoints."""
    ingress, service, slice_ = ingress_docs(i, (port,))
    # Headless: the test API server's /16 of cluster IPs holds 65,534, fewer than
    # 100,000 Services, and ferryman routes to the slices' endpoints anyway.
    service["spec"]["clusterIP"] = "None"
    slice_["endpoints"] = [
        {"addresses": [a], "conditions": {"ready": True}} for a in host.addresses
    ]
    return [ingress, service, slice_]


def _clients(kubeconfig: str, n: int) -> list[Any]:
    from lightkube import Client
    from lightkube.config.kubeconfig import KubeConfig

    return [
        Client(config=KubeConfig.from_file(kubeconfig), field_manager="bench") for _ in range(n)
    ]


def create_all(kubeconfig: str, docs: list[dict[str, Any]], threads: int = 8) -> None:
    """Creates every object, ``threads`` requests at a time (30,000 one by one take minutes)."""
    from lightkube import codecs

    clients = _clients(kubeconfig, threads)

    def work(k: int) -> None:
        for doc in docs[k::threads]:
            clients[k].create(codecs.from_dict(doc))

    with ThreadPoolExecutor(threads) as pool:
        for f in [pool.submit(work, k) for k in range(threads)]:
            f.result()


class Controller:
    """``ferryman run`` in Kubernetes mode, as bench.processes.Ferryman in manifests mode."""

    def __init__(self, workdir: Path, kubeconfig: str) -> None:
        self.dir = workdir
        self.kubeconfig = kubeconfig
        self.http_port, self.ready_port, self.metrics_port = free_port(), free_port(), free_port()
        self.nginx: BackendNginx | None = None

    def start(self) -> float:
        self.dir.mkdir(parents=True, exist_ok=True)
        log = (self.dir / "ferryman.log").open("ab")
        started = time.monotonic()
        self.proc = subprocess.Popen(
            [str(FERRYMAN), "run", "--kubeconfig", self.kubeconfig,
             "--state-dir", str(self.dir / "state"),
             "--http-port", str(self.http_port), "--https-port", str(free_port()),
             "--ready-port", str(self.ready_port), "--metrics-port", str(self.metrics_port),
             "--worker-processes", "2", "--log-level", "warning"],
            stdout=log, stderr=log,
        )  # fmt: skip
        url = f"http://127.0.0.1:{self.ready_port}/nginx-ready"
        while get(url, timeout=1)[0] != 200:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ferryman exited {self.proc.returncode}; see {log.name}")
            if time.monotonic() - started > 600:
                raise RuntimeError("ferryman not ready after 600 s")
            time.sleep(0.005)
        return time.monotonic() - started

    def request(self, host: str, path: str) -> tuple[int, str]:
        return get(f"http://127.0.0.1:{self.http_port}{path}", host=host, timeout=5)

    def reloads(self) -> int:
        _, text = get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10)
        return int(
            sum(
                float(line.rpartition(" ")[2])
                for line in text.splitlines()
                if line.startswith("nginx_ingress_controller_nginx_reloads_total{")
            )
        )

    def rss_mb(self) -> float:
        assert self.proc is not None
        return round(rss_kib(self.proc.pid) / 1024, 1)

    def nginx_pss_mb(self) -> float:
        """NGINX's master and workers, shared pages split among them."""
        master = int((self.dir / "state" / "nginx.pid").read_text())
        return round(sum(pss_kib(p) for p in (master, *children(master))) / 1024, 1)

    def nginx_memory_mb(self) -> dict[str, float]:
        """NGINX's private pages and its zones' allocated pages (each once)."""
        master = int((self.dir / "state" / "nginx.pid").read_text())
        private, zones = nginx_memory_kib(master)
        return {"private": round(private / 1024, 1), "zones": round(zones / 1024, 1)}

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(60)


def _wait(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.005)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(n: int, args: argparse.Namespace, host: TestHost, work: Path) -> dict[str, Any]:
    from lightkube import codecs
    from lightkube.resources.discovery_v1 import EndpointSlice

    from testkit.apiserver import APIServer, build

    docs = [d for i in range(n) for d in objects(i, host, host.ports[i % POOL])]
    started = time.monotonic()
    if args.populate == "seed":
        unused = 10**9  # an index no Ingress of the bench has: renamed to PROBE
        text = json.dumps(objects(unused, host, host.ports[0]))
        probe = json.loads(text.replace(f"app{unused}", PROBE))
        server = seeded_server(build(), work / f"apiserver{n}", probe, docs)
    else:
        server = APIServer(build(), work / f"apiserver{n}")
        server.start()
        create_all(server.kubeconfig, docs)
    try:
        populated = time.monotonic() - started
        result: dict[str, Any] = {
            "ingresses": n,
            "populate": args.populate,
            "objects_created_s": round(populated, 1),
            "objects_per_s": round(len(docs) / populated),
        }
        if args.populate == "seed":
            # The rest of the populating time is two API server starts and a probe.
            result["etcd_writes_s"] = seed_seconds(server)
        del docs
        readies, cpus, reloads = [], [], []
        c: Controller | None = None
        for s in range(args.starts):
            if c is not None:
                c.stop()
            c = Controller(work / f"ferryman{n}-{s}", server.kubeconfig)
            try:
                readies.append(round(c.start(), 3))
                assert c.proc is not None
                cpus.append(round(process_cpu_seconds(c.proc.pid), 2))
                reloads.append(c.reloads())
                status, _ = c.request(f"app{n - 1}.bench.test", "/p2/x")
                assert status == 200, f"the last Ingress answered {status}"
            except BaseException:
                c.stop()
                raise
        result["ready_s"] = statistics.median(readies)
        result["ready_s_each"] = readies
        result["controller_cpu_to_ready_s"] = statistics.median(cpus)
        result["startup_reloads"] = reloads
        # The last start goes on for the rest (a start at 100,000 takes minutes).
        assert c is not None
        try:
            time.sleep(2)  # the status updates of N Ingresses go out first
            result["controller_rss_mb"] = c.rss_mb()
            result["nginx_pss_mb"] = c.nginx_pss_mb()
            result["nginx_memory_mb"] = c.nginx_memory_mb()
            client = server.client()
            ttr = []
            for s in range(args.samples):
                i = n + s
                t = time.monotonic()
                for doc in objects(i, host, host.ports[i % POOL]):
                    client.create(codecs.from_dict(doc))
                _wait(lambda h=f"app{i}.bench.test": c.request(h, "/p0")[0] == 200, 60, "route")  # type: ignore[misc]
                ttr.append(time.monotonic() - t)
            result["time_to_route_p50_s"] = round(statistics.median(ttr), 3)
            result["time_to_route_p99_s"] = round(_percentile(ttr, 0.99), 3)
            before = c.reloads()
            follow = []
            per_round = min(100, n)
            for r in range(args.churn_rounds):
                changed = [(r * per_round + k) % n for k in range(per_round)]
                target = {i: host.ports[(i + r + 1) % POOL] for i in changed}
                t = time.monotonic()
                for i in changed:
                    ports = [{"name": "http", "port": target[i]}]
                    client.patch(EndpointSlice, f"app{i}-0", {"ports": ports}, namespace="default")
                for i in changed:
                    _wait(
                        lambda h=f"app{i}.bench.test", w=str(target[i]): (  # type: ignore[misc]
                            c.request(h, "/p0")[1].strip() == w
                        ),
                        60,
                        "churn",
                    )
                follow.append(time.monotonic() - t)
            result["churn"] = {
                "endpoint_changes": per_round * args.churn_rounds,
                "reloads": c.reloads() - before,
                "follow_p50_s": round(statistics.median(follow), 3),
                "follow_max_s": round(max(follow), 3),
            }
            result["controller_rss_after_mb"] = c.rss_mb()
            result["nginx_pss_after_mb"] = c.nginx_pss_mb()
            result["nginx_memory_after_mb"] = c.nginx_memory_mb()
        finally:
            c.stop()
        return result
    finally:
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="100,1000,3000,10000")
    ap.add_argument("--starts", type=int, default=3, help="ferryman starts per size")
    ap.add_argument("--samples", type=int, default=20, help="time-to-route samples")
    ap.add_argument("--churn-rounds", type=int, default=10)
    ap.add_argument(
        "--populate",
        choices=("seed", "api"),
        default="seed",
        help="objects written into the API server's etcd before it starts (bench.seeding), "
        "or created through the API (~30x slower)",
    )
    ap.add_argument("--out", type=Path, default=Path("bench/results/kubernetes.json"))
    args = ap.parse_args()
    compile_bytecode()
    results: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{len(os.sched_getaffinity(0))} cores",
        "command": f"python -m bench.kubernetes --sizes {args.sizes} --starts {args.starts} "
        f"--samples {args.samples} --churn-rounds {args.churn_rounds} --populate {args.populate}",
        "kubernetes": [],
    }
    with tempfile.TemporaryDirectory(prefix="fkbench-", dir="/tmp") as tmp:
        host = TestHost(Path(tmp) / "backends")
        host.start()
        try:
            for n in (int(x) for x in args.sizes.split(",")):
                print(f"kubernetes mode, {n} Ingresses ...", flush=True)
                results["kubernetes"].append(measure(n, args, host, Path(tmp)))
                print(results["kubernetes"][-1], flush=True)
        finally:
            host.stop()
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
