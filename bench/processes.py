"""The real processes a benchmark drives: a backend NGINX, ferryman, wrk."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import random
import re
import signal
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from testkit.metrics_text import parse_metrics, reload_count

ROOT = Path(__file__).resolve().parents[1]
FERRYMAN = ROOT / ".venv" / "bin" / "ferryman"
T = TypeVar("T")


def modules_dir_args() -> list[str]:
    """``--nginx-modules-dir`` from $FERRYMAN_TEST_NGINX_MODULES_DIR (as the
    integration tests read it: a module built from this checkout), none when unset."""
    modules = os.environ.get("FERRYMAN_TEST_NGINX_MODULES_DIR")
    return ["--nginx-modules-dir", modules] if modules else []


def built(script: str) -> str:
    """The binary a build script prints (scripts/build-nginx.sh: NGINX 1.30.4,
    scripts/build-angie.sh: Angie 1.12.1; cached by input hash)."""
    out = subprocess.run(
        [str(ROOT / "scripts" / script)], capture_output=True, text=True, check=True
    )
    return out.stdout.strip().splitlines()[-1]


def server_binary(flavour: str) -> str:
    """The server's binary (``nginx``: Debian's, found on PATH)."""
    scripts = {"nginx-1.30": "build-nginx.sh", "angie": "build-angie.sh"}
    return built(scripts[flavour]) if flavour in scripts else "nginx"


def server_args(flavour: str) -> list[str]:
    """``ferryman run``'s flags for a server: ``nginx`` (Debian's 1.22, with
    this checkout's module when the environment names it), ``nginx-1.30`` or
    ``angie`` (each found with its modules and Lua libraries beside it)."""
    if flavour == "nginx-1.30":
        return ["--nginx-binary", built("build-nginx.sh")]
    if flavour == "angie":
        return ["--data-plane", "angie", "--data-plane-binary", built("build-angie.sh")]
    return modules_dir_args()


def compile_bytecode() -> None:
    """Bytecode for ferryman and its dependencies, as the image has it (pip
    compiles what it installs). Without it, where PYTHONDONTWRITEBYTECODE is set
    (this machine) every start compiles them from source: ~0.5 s more to ready.
    And the compiled templates, as the image and scripts/setup.sh write them."""
    import compileall
    import sys
    import sysconfig

    for d in (ROOT / "src", Path(sysconfig.get_paths()["purelib"])):
        compileall.compile_dir(d, quiet=2)
    subprocess.run([sys.executable, "-m", "ferryman.configs.render"], check=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str, host: str | None = None, timeout: float = 2.0) -> tuple[int, str]:
    req = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""
    except (urllib.error.URLError, OSError):
        return 0, ""


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def pss_kib(pid: int) -> int:
    """Proportional set size: shared pages split among the processes sharing them."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    m = re.search(r"^Pss:\s+(\d+)", text, re.M)
    return int(m.group(1)) if m else 0


def nginx_memory_kib(master: int) -> tuple[int, int]:
    """What an NGINX master and its workers hold: their private pages, and the
    pages allocated to their shared memory zones, each zone counted once.
    PSS alone misleads for zones: a page is counted only in processes that
    touched it, so records the start-up's pre-reload workers wrote show up
    only when today's workers first read them (at 100,000 Ingresses PSS rose
    ~60 MB over the first requests while the zones' allocated pages did not)."""
    private = 0
    zones: dict[int, int] = {}
    for pid in (master, *children(master)):
        proc = Path(f"/proc/{pid}")
        try:
            rollup = (proc / "smaps_rollup").read_text()
            mapped = list((proc / "map_files").iterdir())
        except OSError:
            continue
        private += sum(
            int(m) for m in re.findall(r"^Private_(?:Clean|Dirty):\s+(\d+)", rollup, re.M)
        )
        for path in mapped:
            try:
                # NGINX's zones are shared anonymous mappings, shown as /dev/zero.
                if str(path.readlink()).startswith("/dev/zero"):
                    st = path.stat()
                    zones[st.st_ino] = st.st_blocks * 512 // 1024
            except OSError:
                continue
    return private, sum(zones.values())


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def process_cpu_seconds(pid: int, children: bool = False) -> float:
    """User + system CPU of one process so far (``children``: of its children
    that have ended instead: the manifests parser's second process, nginx -t, the
    fallback certificate's). On a machine shared with other work, the
    controller's CPU to ready varies far less than the wall clock."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    first = 13 if children else 11
    return (int(fields[first]) + int(fields[first + 1])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(master: int) -> float:
    """User + system CPU of an NGINX master and its workers so far."""
    ticks = 0
    for pid in (master, *children(master)):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


class BackendNginx:
    """A second NGINX as the backends: each port answers its own number, fast
    enough that the data plane under test, not the backend, limits throughput.

    ``addresses`` it listens on (each with every port), ``run_in`` a command
    prefix to start it with (``ip netns exec NAME`` for a test host's)."""

    def __init__(
        self,
        workdir: Path,
        ports: list[int],
        addresses: tuple[str, ...] = ("127.0.0.1",),
        run_in: tuple[str, ...] = (),
    ) -> None:
        self.dir = workdir
        self.ports = ports
        self.dir.mkdir(parents=True, exist_ok=True)
        # reuseport spreads loopback clients over the accept queue; one worker anyway.
        option = " reuseport" if addresses == ("127.0.0.1",) else ""
        listens = "\n".join(f"        listen {a}:{p}{option};" for a in addresses for p in ports)
        (self.dir / "nginx.conf").write_text(
            f"""
worker_processes 1;
pid {self.dir}/nginx.pid;
error_log stderr error;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 100000;
    server {{
{listens}
        location / {{ return 200 "$server_port\\n"; }}
    }}
}}
"""
        )
        self.proc = subprocess.Popen(
            [*run_in, "nginx", "-p", str(self.dir), "-c", str(self.dir / "nginx.conf"),
             "-e", "stderr", "-g", "daemon off;"],
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while get(f"http://{addresses[-1]}:{ports[-1]}/")[0] != 200:
            if time.monotonic() > deadline:
                raise RuntimeError("backend nginx did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGQUIT)
        self.proc.wait(10)


def ingress_docs(i: int, ports: tuple[int, int], paths: int = 3) -> list[dict[str, Any]]:
    """Ingress i: its own host with ``paths`` paths, its own Service with 2 endpoints."""
    name = f"app{i}"
    return [
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "ingressClassName": "ferryman",
                "rules": [
                    {
                        "host": f"{name}.bench.test",
                        "http": {
                            "paths": [
                                {
                                    "path": f"/p{j}",
                                    "pathType": "Prefix",
                                    "backend": {"service": {"name": name, "port": {"number": 80}}},
                                }
                                for j in range(paths)
                            ]
                        },
                    }
                ],
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"ports": [{"port": 80, "name": "http"}]},
        },
        *endpoint_slices(name, ports),
    ]


def endpoint_slices(service: str, ports: tuple[int, ...]) -> list[dict[str, Any]]:
    # One slice per port: an EndpointSlice has one port list for all its endpoints.
    return [
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{service}-{k}",
                "namespace": "default",
                "labels": {"kubernetes.io/service-name": service},
            },
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": port}],
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
        }
        for k, port in enumerate(ports)
    ]


def write_yaml(path: Path, docs: list[dict[str, Any]]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    tmp.replace(path)


@dataclass
class Ferryman:
    workdir: Path
    flavour: str = "nginx"  # the server (server_args)
    http_port: int = field(default_factory=free_port)
    https_port: int = field(default_factory=free_port)
    ready_port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    extra_args: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.manifests = self.workdir / "manifests"
        self.manifests.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, poll: float = 0.05) -> float:
        """Start and wait until ready, asking every ``poll`` seconds; returns
        seconds from spawn to ready."""
        log = (self.workdir / "ferryman.log").open("ab")
        started = time.monotonic()
        self.proc = subprocess.Popen(
            [
                str(FERRYMAN), "run", "--manifests", str(self.manifests),
                "--state-dir", str(self.workdir / "state"),
                "--http-port", str(self.http_port), "--https-port", str(self.https_port),
                "--ready-port", str(self.ready_port), "--metrics-port", str(self.metrics_port),
                "--worker-processes", "2", "--log-level", "warning",
                *server_args(self.flavour),
                *self.extra_args,
            ],
            stdout=log,
            stderr=log,
        )  # fmt: skip
        url = f"http://127.0.0.1:{self.ready_port}/nginx-ready"
        while get(url, timeout=1)[0] != 200:
            if self.proc.poll() is not None:
                tail = (self.workdir / "ferryman.log").read_text().splitlines()[-20:]
                raise RuntimeError(f"ferryman exited {self.proc.returncode}:\n" + "\n".join(tail))
            if time.monotonic() - started > 600:
                raise RuntimeError("ferryman not ready after 600 s")
            time.sleep(poll)
        return time.monotonic() - started

    def request(self, host: str, path: str) -> tuple[int, str]:
        return get(f"http://127.0.0.1:{self.http_port}{path}", host=host, timeout=5)

    def metrics(self) -> dict[str, float]:
        _, text = get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10)
        return parse_metrics(text)

    def reloads(self) -> int:
        """Reloads, whatever their reason."""
        return reload_count(self.metrics())

    def memory(self) -> dict[str, float]:
        assert self.proc is not None
        master = int((self.workdir / "state" / "nginx.pid").read_text())
        nginx = [master, *children(master)]
        return {
            "controller_rss_mb": rss_kib(self.proc.pid) / 1024,
            "nginx_pss_mb": sum(pss_kib(p) for p in nginx) / 1024,
            "nginx_rss_mb": sum(rss_kib(p) for p in nginx) / 1024,
        }

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(60)


def wrk(
    url: str, host: str, seconds: int, connections: int = 64, headers: Sequence[str] = ()
) -> dict[str, float]:
    extra = [a for h in headers for a in ("-H", h)]
    out = subprocess.run(
        ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "-H", f"Host: {host}", *extra,
         "--latency", url],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    return {"rps": rps, "non_2xx": float(non2xx.group(1)) if non2xx else 0.0}


def dump(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n")


@contextlib.contextmanager
def bench_bed(
    prefix: str, extra_args: list[str] | None = None, flavour: str = "nginx"
) -> Iterator[tuple[Path, BackendNginx, Ferryman]]:
    """A benchmark's work directory under /tmp (NGINX's unix sockets want short
    paths), a backend NGINX on two ports and a ferryman not yet started (on
    ``flavour``'s server, ``server_args``); both are stopped after the block.
    Bytecode is compiled first, so that no start measured includes compiling."""
    compile_bytecode()
    with tempfile.TemporaryDirectory(prefix=prefix, dir="/tmp") as tmp:
        work = Path(tmp)
        # NGINX's workers (nobody, under root) connect to unix sockets in the
        # state dir: TLS passthrough's hop, the Gateway's h2c hop on 1.22.
        work.chmod(0o711)
        backends = BackendNginx(work / "backends", [free_port(), free_port()])
        f = Ferryman(work / "ferryman", flavour=flavour, extra_args=extra_args or [])
        try:
            yield work, backends, f
        finally:
            f.stop()
            backends.stop()


@contextlib.contextmanager
def started_sides(
    work: Path, sides: dict[str, tuple[list[str], list[dict[str, Any]]]]
) -> Iterator[dict[str, Ferryman]]:
    """An A/B comparison's ferrymen: one per side (its extra arguments, its
    manifests), all started before the block and stopped after it."""
    started: dict[str, Ferryman] = {}
    try:
        for name, (extra, docs) in sides.items():
            f = Ferryman(work / name, extra_args=extra)
            write_yaml(f.manifests / "app.yaml", docs)
            f.start()
            started[name] = f
        yield started
    finally:
        for f in started.values():
            f.stop()


def alternating(names: list[T], round_: int) -> list[T]:
    """``names`` in the order of round ``round_``: each goes first in turn, so
    that warming and drift weigh on every side alike."""
    shift = round_ % len(names)
    return names[shift:] + names[:shift]


def median_ratio(ours: Sequence[float], theirs: Sequence[float]) -> tuple[float, float, float]:
    """The median of paired rounds' ratios, with a 90% bootstrap interval: on a
    shared 2-core machine one-second rounds vary by +-20%, and a median alone
    does not say whether 0.93 and 0.97 differ."""
    ratios = [a / b for a, b in zip(ours, theirs, strict=True)]
    rng = random.Random(0)
    medians = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(2000))
    return statistics.median(ratios), medians[100], medians[1899]


def when_and_where() -> dict[str, str]:
    """When a result was measured and on what machine: results are compared
    across runs, and the core count bounds what NGINX can do."""
    return {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} cores",
    }


def in_work(
    run: Callable[[Path], dict[str, Any]], work: Path | None, prefix: str
) -> dict[str, Any]:
    """``run`` in ``work`` (kept, to read its logs after) or in a temporary
    directory under /tmp (short paths: NGINX's unix sockets live there)."""
    if work:
        return run(work)
    with tempfile.TemporaryDirectory(prefix=prefix, dir="/tmp") as tmp:
        return run(Path(tmp))


def publish(result: dict[str, Any], table: str, out: Path) -> None:
    """Prints the result's ``table`` and writes the result as JSON to ``out``."""
    print(table)
    out.parent.mkdir(parents=True, exist_ok=True)
    dump(out, result)
    print(f"wrote {out}")
