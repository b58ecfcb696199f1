"""Where the controller's memory goes, at N Ingresses in manifests mode.

    .venv/bin/python -m bench.memory --sizes 100,1000,3000,10000 [--slices 2]
    .venv/bin/python -m bench.memory --profile 10000 [--slices 2]
    .venv/bin/python -m bench.memory --kubernetes --sizes 100,1000,3000


The first form starts ``ferryman run`` (real NGINX) on N Ingresses (the bench's
workload: each its own host with 3 Prefix paths, its own Service and
``--slices`` EndpointSlices with one ready endpoint each), waits until it is
ready and settled, and prints the controller's RSS and peak RSS.

With ``--kubernetes`` the same objects are created in tools/testapiserver's
real kube-apiserver (one server per size) and ferryman runs in Kubernetes mode
against it.

The last form runs the same pipeline in this process (manifests source, store,
controller; a data plane that only acknowledges) and prints what stays alive
afterwards: tracemalloc's top allocation sites, and the objects reachable from
the source, the store and the controller grouped by type, each counted once.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from bench.processes import (
    FERRYMAN,
    Ferryman,
    compile_bytecode,
    endpoint_slices,
    free_port,
    get,
    ingress_docs,
    rss_kib,
    write_yaml,
)

# Any ports do: nothing is requested through them.
PORTS = (18080, 18081, 18082, 18083)


def write_manifests(directory: Path, n: int, slices: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        docs = ingress_docs(i, PORTS[:1])[:2]  # the Ingress and its Service
        docs += endpoint_slices(f"app{i}", PORTS[:slices])
        for s in docs[2:]:  # two ready endpoints in all, as the workload
            s["endpoints"] = [
                {"addresses": [f"10.{i >> 8 & 255}.{i & 255}.{k}"], "conditions": {"ready": True}}
                for k in range(1, 1 + (2 // slices or 1))
            ]
        write_yaml(directory / f"app{i}.yaml", docs)


def hwm_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def measure_rss(n: int, slices: int, work: Path) -> dict[str, float]:
    f = Ferryman(work / f"n{n}")
    write_manifests(f.manifests, n, slices)
    ready = f.start()
    try:
        time.sleep(3)  # let the first flush's garbage go and the queue settle
        assert f.proc is not None
        return {
            "ingresses": n,
            "endpoint_slices": n * slices,
            "ready_s": round(ready, 2),
            "controller_rss_mb": round(rss_kib(f.proc.pid) / 1024, 1),
            "controller_peak_rss_mb": round(hwm_kib(f.proc.pid) / 1024, 1),
        }
    finally:
        f.stop()


def measure_rss_kubernetes(n: int, slices: int, work: Path) -> dict[str, float]:
    from lightkube import Client
    from lightkube.config.kubeconfig import KubeConfig

    from testkit.apiserver import APIServer, apply, build

    server = APIServer(build(), work / f"apiserver{n}")
    server.start()
    proc = None
    try:
        client = Client(config=KubeConfig.from_file(server.kubeconfig), field_manager="bench")
        write_manifests(work / f"k{n}", n, slices)
        for path in sorted((work / f"k{n}").iterdir()):
            apply(client, *yaml.safe_load_all(path.read_text()))
        state, ready_port = work / f"kstate{n}", free_port()
        log = (work / f"ferryman{n}.log").open("ab")
        started = time.monotonic()
        proc = subprocess.Popen(
            [str(FERRYMAN), "run", "--kubeconfig", server.kubeconfig, "--state-dir", str(state),
             "--http-port", str(free_port()), "--https-port", str(free_port()),
             "--ready-port", str(ready_port), "--metrics-port", str(free_port()),
             "--worker-processes", "2", "--log-level", "warning"],
            stdout=log, stderr=log,
        )  # fmt: skip
        while get(f"http://127.0.0.1:{ready_port}/nginx-ready", timeout=1)[0] != 200:
            if proc.poll() is not None or time.monotonic() - started > 600:
                raise RuntimeError(f"ferryman did not become ready; see {log.name}")
            time.sleep(0.1)
        ready = time.monotonic() - started
        time.sleep(3)
        return {
            "ingresses": n,
            "endpoint_slices": n * slices,
            "mode": "kubernetes",
            "ready_s": round(ready, 2),
            "controller_rss_mb": round(rss_kib(proc.pid) / 1024, 1),
            "controller_peak_rss_mb": round(hwm_kib(proc.pid) / 1024, 1),
        }
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
        server.stop()


class _NullDataPlane:
    async def apply(self, files: Mapping[str, str | None]) -> float:
        return 0.0

    async def push(self, records: Mapping[Any, str], full: bool) -> Any:
        from ferryman.dataplane import PushResult

        return PushResult(1)


def deep_by_type(roots: list[object], seen: set[int]) -> tuple[Counter[str], Counter[str]]:
    """Bytes and counts of every object reachable from ``roots`` and not in ``seen``
    (ids; updated), by type. Modules, classes and functions are not followed:
    the code is not the data."""
    sizes: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    stack = list(roots)
    skip = (type, type(sys), type(deep_by_type), type(len))
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, skip):
            continue
        seen.add(id(o))
        name = type(o).__name__
        sizes[name] += sys.getsizeof(o)
        counts[name] += 1
        stack.extend(gc.get_referents(o))
    return sizes, counts


def profile(n: int, slices: int, work: Path, top: int) -> None:
    from ferryman.app.wiring import BUILT_IN
    from ferryman.engine.controller import Controller
    from ferryman.engine.queue_keys import QueueKey
    from ferryman.engine.secrets import SecretStore
    from ferryman.engine.settings import Settings
    from ferryman.engine.sink import QueueingSink
    from ferryman.engine.store import Store
    from ferryman.engine.workqueue import WorkQueue
    from ferryman.kinds import REGISTRY
    from ferryman.observability.metrics import Metrics
    from ferryman.report import RecordingReporter
    from ferryman.sources.manifests import ManifestsSource

    write_manifests(work / "manifests", n, slices)
    gc.collect()
    tracemalloc.start()
    rss_before = rss_kib_self()
    store = Store(REGISTRY)
    queue: WorkQueue[QueueKey] = WorkQueue()
    settings = Settings(state_dir=work / "state", manifests=work / "manifests")
    controller = Controller(
        settings,
        store,
        queue,
        _NullDataPlane(),
        SecretStore(),
        RecordingReporter(),
        Metrics(),
        {},
        BUILT_IN,
    )
    source = ManifestsSource(
        work / "manifests", QueueingSink(store, queue), lambda w, m: None, REGISTRY
    )
    source.load()
    asyncio.run(controller.drain())
    gc.collect()
    snapshot = tracemalloc.take_snapshot()
    traced, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"{n} Ingresses, {n * slices} EndpointSlices, in process:")
    print(f"  RSS grew {(rss_kib_self() - rss_before) / 1024:.1f} MB (tracemalloc's own included)")
    print(f"  traced: {traced / 2**20:.1f} MB alive, {peak / 2**20:.1f} MB at the peak")
    print(f"  top {top} allocation sites alive:")
    for stat in snapshot.statistics("lineno")[:top]:
        frame = stat.traceback[0]
        where = f"{Path(frame.filename).name}:{frame.lineno}"
        print(f"    {stat.size / 2**20:7.1f} MB {stat.count:9d}  {where}")
    seen: set[int] = set()
    for label, root in (("store", store), ("source", source), ("controller", controller)):
        sizes, counts = deep_by_type([root], seen)
        total = sum(sizes.values())
        print(f"  reachable from the {label} (and not from the above): {total / 2**20:.1f} MB")
        for name, size in sizes.most_common(top):
            print(f"    {size / 2**20:7.1f} MB {counts[name]:9d}  {name}")


def rss_kib_self() -> int:
    import os

    return rss_kib(os.getpid())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="100,1000,3000,10000")
    ap.add_argument("--slices", type=int, default=1, help="EndpointSlices per Service (1 or 2)")
    ap.add_argument("--profile", type=int, metavar="N", help="profile N Ingresses in process")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--kubernetes", action="store_true", help="against a real kube-apiserver")
    args = ap.parse_args()
    compile_bytecode()
    with tempfile.TemporaryDirectory(prefix="fmem-", dir="/tmp") as tmp:
        if args.profile:
            profile(args.profile, args.slices, Path(tmp), args.top)
            return
        for n in (int(x) for x in args.sizes.split(",")):
            measure = measure_rss_kubernetes if args.kubernetes else measure_rss
            print(measure(n, args.slices, Path(tmp)), flush=True)


if __name__ == "__main__":
    main()
