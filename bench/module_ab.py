"""Two builds of ngx_http_ferryman_module side by side: the cost of a module change.

    .venv/bin/python -m bench.module_ab --old OLD.so --new NEW.so [--rounds 12]

One ferryman per build (its own NGINX, ``--nginx-modules-dir`` with Debian's
modules and that build), one route to two backend ports, wrk against each in
turn, the order alternating per round, so both meet the same background load.
Prints NGINX's CPU per request and requests per second, and new/old as the
median of the rounds' ratios: on a shared 2-core machine single runs vary by
tens of percent, CPU per request much less.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from bench.processes import (
    BackendNginx,
    Ferryman,
    cpu_seconds,
    free_port,
    ingress_docs,
    write_yaml,
    wrk,
)

DEBIAN_MODULES = Path("/usr/lib/nginx/modules")
OTHER_MODULES = ("ndk_http_module.so", "ngx_http_lua_module.so", "ngx_stream_module.so")
MODULE = "ngx_http_ferryman_module.so"
HOST = "app0.bench.test"


def _modules_dir(work: Path, name: str, module: Path) -> Path:
    d = work / f"modules-{name}"
    d.mkdir()
    for other in OTHER_MODULES:
        (d / other).symlink_to(DEBIAN_MODULES / other)
    (d / MODULE).write_bytes(module.read_bytes())
    return d


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--old", type=Path, required=True, help="the module before the change")
    ap.add_argument("--new", type=Path, required=True, help="the module after it")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--seconds", type=int, default=5, help="wrk duration per run")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ferryman-module-ab-"))
    backends = BackendNginx(work / "backends", [free_port(), free_port()])
    sides: dict[str, tuple[Ferryman, int]] = {}
    try:
        for name, module in (("old", args.old), ("new", args.new)):
            modules = _modules_dir(work, name, module)
            f = Ferryman(work / name, extra_args=["--nginx-modules-dir", str(modules)])
            ports = (backends.ports[0], backends.ports[1])
            write_yaml(f.manifests / "app0.yaml", ingress_docs(0, ports))
            f.start()
            sides[name] = (f, int((f.workdir / "state" / "nginx.pid").read_text()))
        for f, _ in sides.values():
            wrk(f"http://127.0.0.1:{f.http_port}/p0/x", HOST, 3)  # warm-up, not recorded
        cpu: dict[str, list[float]] = {name: [] for name in sides}
        rps: dict[str, list[float]] = {name: [] for name in sides}
        for i in range(args.rounds):
            for name in sorted(sides, reverse=i % 2 == 1):
                f, master = sides[name]
                before = cpu_seconds(master)
                run = wrk(f"http://127.0.0.1:{f.http_port}/p0/x", HOST, args.seconds)
                if run["non_2xx"]:
                    raise RuntimeError(f"{name}: {run['non_2xx']:.0f} non-2xx answers")
                rps[name].append(run["rps"])
                cpu[name].append((cpu_seconds(master) - before) / (run["rps"] * args.seconds) * 1e6)
        for name in sides:
            rate, per_request = statistics.median(rps[name]), statistics.median(cpu[name])
            print(f"{name}: {rate:.0f} rps, {per_request:.2f} us NGINX CPU per request (medians)")
        cpu_ratios = [n / o for n, o in zip(cpu["new"], cpu["old"], strict=True)]
        rps_ratios = [n / o for n, o in zip(rps["new"], rps["old"], strict=True)]
        print(f"new/old CPU per request: {statistics.median(cpu_ratios):.3f} "
              f"(rounds {min(cpu_ratios):.3f}-{max(cpu_ratios):.3f})")  # fmt: skip
        print(f"new/old requests per second: {statistics.median(rps_ratios):.3f}")
    finally:
        for f, _ in sides.values():
            f.stop()
        backends.stop()


if __name__ == "__main__":
    main()
