"""Real components for integration tests: loopback HTTP backends and a
``ferryman run`` process (with its real NGINX) driven through its CLI."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import random
import re
import selectors
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import yaml

from ferryman.dataplane.in_flight import InFlight
from ferryman.dataplane.main_file import FAST_MODULE, MODULES
from ferryman.dataplane.nginx import NginxManager
from ferryman.dataplane.state_dir import Paths
from testkit.metrics_text import parse_metrics, reload_count

ROOT = Path(__file__).resolve().parents[1]
FERRYMAN = ROOT / ".venv" / "bin" / "ferryman"


DEBIAN_MODULES = Path("/usr/lib/nginx/modules")
# A modules directory to run NGINX with instead of Debian's (a module built
# from this checkout, beside links to Debian's other modules): tests then run
# the module under change without installing it for everyone.
MODULES_DIR_ENV = "FERRYMAN_TEST_NGINX_MODULES_DIR"


def modules_dir_args() -> list[str]:
    """``--nginx-modules-dir`` from $FERRYMAN_TEST_NGINX_MODULES_DIR, none when unset."""
    modules = os.environ.get(MODULES_DIR_ENV)
    return ["--nginx-modules-dir", modules] if modules else []


@functools.cache
def server_binary(server: str) -> str:
    """NGINX 1.30.4 (``nginx``, scripts/build-nginx.sh) or Angie 1.12.1
    (``angie``, scripts/build-angie.sh, the script users run) with the Lua
    runtime and ferryman's modules, built from the vendored sources (cached by
    their hash; a cold build takes 1-3 minutes)."""
    vendor = Path(os.environ.get("FERRYMAN_VENDOR", ROOT.parent / "shared" / "vendor"))
    script = "build-angie.sh" if server == "angie" else "build-nginx.sh"
    out = subprocess.run(
        [str(ROOT / "scripts" / script)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "FERRYMAN_VENDOR": str(vendor)},
    )
    # Not a skip: these flavours' tests are coverage, and CI has the sources.
    assert out.returncode == 0, f"scripts/{script} failed:\n{out.stderr}"
    return out.stdout.strip().splitlines()[-1]


def without_fast_module(workdir: Path) -> list[str]:
    """``ferryman run`` arguments for a modules directory with Debian's modules
    but not ngx_http_ferryman_module: the Lua balancer then is the fast path."""
    modules = workdir / "modules"
    modules.mkdir(exist_ok=True)
    for name in MODULES:
        if name != FAST_MODULE and not (modules / name).exists():
            (modules / name).symlink_to(DEBIAN_MODULES / name)
    return ["--nginx-modules-dir", str(modules)]


def fast_path_counts(f: Ferryman) -> tuple[float, float]:
    """(proxied by the module, handed to the Lua slow path) requests so far."""
    m = f.metrics()
    name = "ferryman_fast_path_requests_total"
    return m[f'{name}{{path="fast"}}'], m[f'{name}{{path="slow"}}']


def reachable(path: Path) -> Path:
    """Let NGINX workers (``nobody`` when tests run as root) traverse to ``path``:
    pytest makes its temporary directories owner-only."""
    for p in (path, *path.parents):
        if p == Path("/tmp") or p == p.parent:
            break
        p.chmod(p.stat().st_mode | 0o011)
    return path


# Below Linux's ephemeral range (32768-60999): a port the kernel handed out for a
# bind to port 0 is also what it hands to outgoing connections, so between the
# check and ferryman's bind any client socket could take it ("address already in
# use" seen when tests run beside other work). Random ports from this range only
# collide with another test run's choice.
_PORTS = (20000, 32000)


def _worker_ports() -> tuple[int, int]:
    """This pytest-xdist worker's share of ``_PORTS``: workers of one run never
    choose the same port (each keeps its own ``_handed_out``)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not worker.startswith("gw") or count < 2:
        return _PORTS
    width = (_PORTS[1] - _PORTS[0]) // count
    low = _PORTS[0] + int(worker[2:]) * width
    return low, low + width - 1


# Never the same port twice in one run: a Ferryman asks for four at once, and none
# is bound until it starts.
_handed_out: set[int] = set()


def free_port() -> int:
    """A TCP port nothing listens on, on any address, at the time of asking
    (IPv6 too: ferryman's public ports listen on both)."""
    for _ in range(1000):
        port = random.randint(*_worker_ports())
        if port in _handed_out:
            continue
        _handed_out.add(port)
        if _bindable(socket.AF_INET, "0.0.0.0", port) and _bindable(socket.AF_INET6, "::", port):
            return port
    raise AssertionError(f"no free port in {_PORTS}")


def _bindable(family: int, address: str, port: int) -> bool:
    try:
        s = socket.socket(family)
    except OSError:  # no such family here: nothing can hold the port there
        return True
    with s:
        try:
            if family == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            s.bind((address, port))
        except OSError:
            return False
    return True


# ---- backends ------------------------------------------------------------------------


class _EchoHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _EchoServer

    def _answer(self) -> None:
        self.server.hits += 1
        self.server.peers.add(self.client_address)
        delay = re.search(r"[?&]delay=([\d.]+)", self.path)
        if delay:
            time.sleep(float(delay.group(1)))
        if re.search(r"[?&]hold(&|$)", self.path):
            # Held open until the test calls Backend.release().
            with self.server.lock:
                self.server.holding += 1
            try:
                self.server.released.wait(30)
            finally:
                with self.server.lock:
                    self.server.holding -= 1
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        payload = json.dumps(
            {
                "name": self.server.name,
                "method": self.command,
                "path": self.path,
                "version": self.request_version,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": body.decode("latin-1"),
            }
        ).encode()
        # ?status=NNN: answered with that status (an upstream's error).
        status = re.search(r"[?&]status=(\d{3})(&|$)", self.path)
        self.send_response(int(status.group(1)) if status else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _EchoServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, name: str, address: str = "127.0.0.1", port: int = 0) -> None:
        if ":" in address:
            self.address_family = socket.AF_INET6
        super().__init__((address, port), _EchoHandler)
        self.name = name
        self.hits = 0
        self.peers: set[tuple[str, int]] = set()
        self.lock = threading.Lock()
        self.holding = 0  # requests with ?hold waiting for released
        self.released = threading.Event()


@dataclass
class Backend:
    name: str
    server: _EchoServer

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def address(self) -> str:
        return str(self.server.server_address[0])

    @property
    def hits(self) -> int:
        return self.server.hits

    @property
    def connections(self) -> int:
        """Distinct client (NGINX) source ports seen: one per upstream connection."""
        return len(self.server.peers)

    @property
    def holding(self) -> int:
        """Requests with ``?hold`` in their query held open now."""
        return self.server.holding

    def release(self) -> None:
        """Answer the held requests (and any later one at once)."""
        self.server.released.set()


class BrokenBackend:
    """Accepts connections and closes them without answering: a failing peer."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.accepted = 0
        self.name = "broken"
        threading.Thread(target=self._loop, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    def _loop(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()


@dataclass
class RemoteBackend:
    """An echo backend in another network namespace (see testkit/netns.py)."""

    name: str
    address: str
    port: int
    proc: subprocess.Popen[str]


def serve_echo(name: str, address: str) -> None:
    """Run one echo backend in the foreground; prints its port once listening."""
    server = _EchoServer(name, address)
    print(server.server_address[1], flush=True)
    server.serve_forever()


class Backends:
    def __init__(self) -> None:
        self._all: list[Backend] = []

    def start(self, name: str, address: str = "127.0.0.1", port: int = 0) -> Backend:
        server = _EchoServer(name, address, port)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        b = Backend(name, server)
        self._all.append(b)
        return b

    @property
    def hits(self) -> int:
        """Requests all of them have seen so far."""
        return sum(b.hits for b in self._all)

    def stop_all(self) -> None:
        for b in self._all:
            b.server.shutdown()
            b.server.server_close()


# ---- manifests -----------------------------------------------------------------------


def ingress(
    name: str,
    rules: list[dict[str, Any]] | None = None,
    *,
    tls: list[dict[str, Any]] | None = None,
    default_backend: dict[str, Any] | None = None,
    class_name: str | None = "ferryman",
    annotations: dict[str, str] | None = None,
    created: str | None = None,
    namespace: str = "default",
) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        md["annotations"] = annotations
    if created:
        md["creationTimestamp"] = created
    spec: dict[str, Any] = {}
    if class_name is not None:
        spec["ingressClassName"] = class_name
    if rules is not None:
        spec["rules"] = rules
    if tls is not None:
        spec["tls"] = tls
    if default_backend is not None:
        spec["defaultBackend"] = default_backend
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": md, "spec": spec}


def backend(service: str, port: int | str = 80) -> dict[str, Any]:
    key = "number" if isinstance(port, int) else "name"
    return {"service": {"name": service, "port": {key: port}}}


def path(p: str, service: str, path_type: str = "Prefix", port: int | str = 80) -> dict[str, Any]:
    return {"path": p, "pathType": path_type, "backend": backend(service, port)}


def rule(host: str | None, *paths: dict[str, Any]) -> dict[str, Any]:
    r: dict[str, Any] = {"http": {"paths": list(paths)}}
    if host:
        r["host"] = host
    return r


def service(
    name: str, port: int = 80, port_name: str | None = None, namespace: str = "default"
) -> list[dict[str, Any]]:
    p: dict[str, Any] = {"port": port}
    if port_name:
        p["name"] = port_name
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"ports": [p]},
        }
    ]


def service_with_backends(
    name: str,
    backends: Sequence[Backend | BrokenBackend | RemoteBackend],
    *,
    not_ready: tuple[Backend, ...] = (),
    port: int = 80,
    port_name: str | None = None,
    namespace: str = "default",
) -> list[dict[str, Any]]:
    """A Service plus one EndpointSlice per backend (backends differ by port)."""
    docs = service(name, port, port_name, namespace)
    for b in backends:
        address = getattr(b, "address", "127.0.0.1")
        sp: dict[str, Any] = {"port": b.port}
        if port_name:
            sp["name"] = port_name
        docs.append(
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": f"{name}-{b.name}",
                    "namespace": namespace,
                    "labels": {"kubernetes.io/service-name": name},
                },
                "addressType": "IPv6" if ":" in address else "IPv4",
                "ports": [sp],
                "endpoints": [
                    {
                        "addresses": [address],
                        "conditions": {"ready": b not in not_ready},
                        # As the EndpointSlice controller writes it (the latency
                        # histogram's pod_name).
                        "targetRef": {
                            "kind": "Pod",
                            "name": f"{name}-{b.name}",
                            "namespace": namespace,
                        },
                    }
                ],
            }
        )
    return docs


def tls_secret(name: str, hosts: list[str], namespace: str = "default") -> dict[str, Any]:
    import base64

    from ferryman.dataplane.fallback import self_signed

    key_pem, crt = self_signed(hosts, days=30)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": namespace},
        "data": {
            "tls.crt": base64.b64encode(crt).decode(),
            "tls.key": base64.b64encode(key_pem).decode(),
        },
    }


# ---- the controller process --------------------------------------------------------------


@functools.cache
def _insecure_context() -> ssl.SSLContext:
    # Test certificates are self-signed; what is checked is which one is served.
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


_EVENT_RE = re.compile(r"msg=event (.*)$")


@dataclass
class Response:
    status: int
    headers: httpx.Headers
    text: str

    def json(self) -> Any:
        return json.loads(self.text)

    @property
    def served_by(self) -> str | None:
        try:
            return str(self.json()["name"])
        except (ValueError, KeyError, TypeError):
            return None


@dataclass
class Ferryman:
    workdir: Path
    extra_args: list[str] = field(default_factory=list)
    kubeconfig: str | None = None  # Kubernetes mode instead of the manifests dir
    # The server: "nginx" (Debian's 1.22), "nginx-1.30" or "angie" (NGINX
    # 1.30.4 or Angie 1.12.1 running the same records data plane, built with
    # their own Lua runtime and ferryman's modules by scripts/build-nginx.sh
    # and scripts/build-angie.sh).
    flavour: str = "nginx"
    env: dict[str, str] = field(default_factory=dict)
    http_port: int = field(default_factory=free_port)
    https_port: int = field(default_factory=free_port)
    ready_port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    # Runs ferryman through another program, e.g. setpriv to run it as another user.
    command_prefix: list[str] = field(default_factory=list)
    # Spell the command line as NIC's manifests do (Go flags, NIC's names, no "run"):
    # NIC's default class, nginx, is then served unless extra_args name another.
    nic_flags: bool = False
    # Starts the server through a wrapper that sleeps this long first, so a test
    # sees the window before the first configuration is live on every flavour.
    server_delay: float = 0.0
    proc: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        self.manifests = self.workdir / "manifests"
        self.state = self.workdir / "state"
        self.log_path = self.workdir / "ferryman.log"
        self.manifests.mkdir(parents=True, exist_ok=True)
        reachable(self.workdir)

    # manifests
    def write(self, name: str, *docs: dict[str, Any] | list[dict[str, Any]]) -> None:
        flat: list[dict[str, Any]] = []
        for d in docs:
            flat.extend(d if isinstance(d, list) else [d])
        tmp = self.manifests / f".{name}.tmp"
        tmp.write_text(yaml.safe_dump_all(flat))
        tmp.replace(self.manifests / f"{name}.yaml")

    def write_text(self, name: str, text: str) -> None:
        tmp = self.manifests / f".{name}.tmp"
        tmp.write_text(text)
        tmp.replace(self.manifests / name)

    def remove(self, name: str) -> None:
        (self.manifests / f"{name}.yaml").unlink()

    # lifecycle
    def start(self, wait: bool = True) -> None:
        source = (
            ["--kubeconfig", self.kubeconfig]
            if self.kubeconfig
            else ["--manifests", str(self.manifests)]
        )
        args = [
            *self.command_prefix, str(FERRYMAN), "run", *source,
            "--state-dir", str(self.state),
            "--http-port", str(self.http_port),
            "--https-port", str(self.https_port),
            "--ready-port", str(self.ready_port),
            "--metrics-port", str(self.metrics_port),
            "--worker-processes", "2",
            # Before extra_args: a test's own modules directory wins.
            *(modules_dir_args() if self.flavour == "nginx" else []),
            *self.extra_args,
        ]  # fmt: skip
        if self.nic_flags:  # the same, as NIC's manifests spell flags
            args = [
                *self.command_prefix, str(FERRYMAN), f"-{source[0][2:]}={source[1]}",
                f"-state-dir={self.state}",
                f"-default-http-listener-port={self.http_port}",
                f"-default-https-listener-port={self.https_port}",
                f"-ready-status-port={self.ready_port}",
                f"-prometheus-metrics-listen-port={self.metrics_port}",
                "-enable-prometheus-metrics",
                "-worker-processes=2",
                *(f"-{a[2:]}" if a.startswith("--") else a for a in modules_dir_args()),
                *self.extra_args,
            ]  # fmt: skip
        binary = self._server_binary()
        if self.flavour == "angie":
            args += ["--data-plane", "angie", "--data-plane-binary", binary]
        elif binary != "nginx":
            # Its modules and Lua libraries are found beside the binary.
            args += ["--nginx-binary", binary]
        self._log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            args, stdout=self._log, stderr=self._log, env={**os.environ, **self.env}
        )
        if wait:
            self.wait_ready()

    def _server_binary(self) -> str:
        binary = {"nginx-1.30": "nginx", "angie": "angie"}.get(self.flavour)
        binary = server_binary(binary) if binary else "nginx"
        if not self.server_delay:
            return binary
        # The wrapper sits in a tree of its own whose modules/ and lua/ are the
        # build's, so ferryman finds them beside it as beside the real binary.
        real = Path(shutil.which(binary) or binary).resolve()
        tree = self.workdir / "server"
        (tree / "sbin").mkdir(parents=True, exist_ok=True)
        for part in ("modules", "lua"):
            if (real.parent.parent / part).is_dir() and not (tree / part).exists():
                (tree / part).symlink_to(real.parent.parent / part)
        wrapper = tree / "sbin" / real.name
        wrapper.write_text(f'#!/bin/sh\nsleep {self.server_delay}\nexec {real} "$@"\n')
        wrapper.chmod(0o755)
        return str(wrapper)

    def wait_ready(self, timeout: float = 90.0) -> None:
        # A ceiling, not a delay: a start on a loaded 2-core CI machine (with the
        # apiserver and other tests' NGINX busy) takes several times an idle one's.
        def ready() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"ferryman exited {self.proc.returncode}:\n{self.logs()}")
            try:
                r = httpx.get(f"http://127.0.0.1:{self.ready_port}/nginx-ready", timeout=1)
            except httpx.HTTPError:
                return False
            return r.status_code == 200

        try:
            eventually(ready, timeout, "ferryman ready")
        except AssertionError as e:
            # A start that never gets ready is diagnosed from its log, which a
            # CI run does not keep.
            tail = "\n".join(self.logs().splitlines()[-40:])
            raise AssertionError(f"{e}\nlast lines of ferryman's log:\n{tail}") from None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode

    def nginx_master_pid(self) -> int | None:
        try:
            return int((self.state / "nginx.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def endpoints_socket(self) -> Path:
        """The unix socket of the data plane's /push and /version, from nginx.conf."""
        conf = (self.state / "nginx.conf").read_text()
        start = conf.index("listen unix:") + len("listen unix:")
        return Path(conf[start : conf.index(";", start)])

    def push_lines(self, lines: Sequence[str]) -> httpx.Response:
        """POSTs record lines to the running NGINX as the next version after the
        one it holds, bypassing ferryman's translators.

        Each request on a connection of its own, as ferryman's own pusher does:
        an old worker of the start-up reload may take the first request and
        close its idle keep-alive connection when it gets its shutdown signal,
        so a second request on that connection would find it gone (a CI run
        failed so)."""
        transport = httpx.HTTPTransport(uds=str(self.endpoints_socket()))
        close = {"Connection": "close"}
        with httpx.Client(transport=transport, timeout=10, headers=close) as c:
            version = int(c.get("http://nginx/version").text.strip() or 0)
            body = "\n".join([str(version + 1), *lines]) + "\n"
            return c.post("http://nginx/push", content=body.encode())

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def events(self) -> list[dict[str, str]]:
        out = []
        for line in self.logs().splitlines():
            m = _EVENT_RE.search(line)
            if m:
                out.append(_parse_fields(m.group(1)))
        return out

    def events_for(self, name: str) -> list[dict[str, str]]:
        return [e for e in self.events() if e.get("name") == name]

    def last_event(
        self, name: str, reason: str, kind: str | None = None, timeout: float = 60
    ) -> dict[str, str]:
        """``name``'s last Event (of ``kind``, when given), once its reason is
        ``reason``. A flush writes its Events after its push and reload are
        confirmed (engine/controller.py), so traffic can show a change before its
        Event is there: a loaded machine widens that gap."""

        def last() -> dict[str, str] | None:
            events = [e for e in self.events_for(name) if kind is None or e.get("kind") == kind]
            return events[-1] if events else None

        try:
            return eventually(lambda: (e := last()) is not None and e["reason"] == reason and e,
                              timeout, f"{name}'s {reason} Event")  # fmt: skip
        except AssertionError:
            raise AssertionError(f"{name}'s last Event is not {reason}: {last()}") from None

    def reloads_reach(self, count: int, timeout: float = 60) -> None:
        """Until ``count`` reloads are counted. A reload is counted once ferryman
        confirmed it (a new worker answered), which traffic to the new workers
        can precede."""
        eventually(lambda: self.reloads() >= count, timeout, f"{count} reloads")
        assert self.reloads() == count

    # traffic
    def get(
        self,
        host: str,
        path: str = "/",
        *,
        https: bool = False,
        method: str = "GET",
        headers: dict[str, str] | None = None,
        content: bytes | None = None,
        sni: str | None = None,
    ) -> Response:
        port = self.https_port if https else self.http_port
        scheme = "https" if https else "http"
        hdrs = {"Host": host, **(headers or {})}
        ext = {"sni_hostname": sni or host} if https else {}
        with httpx.Client(verify=_insecure_context(), timeout=10) as c:
            req = c.build_request(
                method,
                f"{scheme}://127.0.0.1:{port}{path}",
                headers=hdrs,
                content=content,
                extensions=ext,
            )
            r = c.send(req, follow_redirects=False)
        return Response(r.status_code, r.headers, r.text)

    def metrics(self) -> dict[str, float]:
        text = httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).text
        return parse_metrics(text)

    def reloads(self) -> int:
        """Reloads counted, whatever their reason."""
        return reload_count(self.metrics())


def status_from(f: Ferryman, client: str, host: str, p: str) -> int:
    """The status of GET ``p`` on ``host`` sent from the loopback address ``client``
    (access rules and allow lists decide by it)."""
    with httpx.Client(transport=httpx.HTTPTransport(local_address=client), timeout=10) as c:
        return c.get(f"http://127.0.0.1:{f.http_port}{p}", headers={"Host": host}).status_code


def in_flight(f: Ferryman) -> InFlight:
    """The data plane's reading of requests in flight, as ferryman takes it."""
    conf = (f.state / "nginx.conf").read_text()
    m = re.search(r"listen unix:(\S+)/nginx-endpoints\.sock;", conf)
    assert m, "nginx.conf has no push socket"
    manager = NginxManager("nginx", Paths(f.state, Path(m.group(1))), 10, lambda s, v: "")
    return asyncio.run(manager.in_flight())


def _parse_fields(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for m in re.finditer(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)', text):
        value = m.group(2)
        out[m.group(1)] = json.loads(value) if value.startswith('"') else value
    return out


def eventually(check: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    """Poll ``check`` until it returns something truthy (and return it).

    ``timeout`` is a ceiling, not a delay: a passing check returns at once, and
    what an idle machine does in a second a loaded CI machine may take ten for."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = check()
            if last:
                return last
        except Exception:  # e.g. a refused handshake before the change is live
            if time.monotonic() >= deadline:
                raise
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last={last!r}")
        time.sleep(0.05)


def served_by(f: Ferryman, host: str, path: str, **kw: Any) -> str | None:
    r = f.get(host, path, **kw)
    return r.served_by if r.status == 200 else str(r.status)


def at_once(port: int, host: str, path: str, n: int) -> list[tuple[int, float]]:
    """``n`` plain HTTP requests that reach NGINX at once, each as (status, seconds
    from the sends to its status line), in the order answered.

    The connections are opened first and the requests then written back to back
    from this one thread, and the answers read by one selector loop: a thread
    per request each making its own client took over 0.35 s to get going on a
    loaded machine, which spread the arrivals (the bucket leaked in between) and
    added the start-up to every measured wait."""
    socks = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(n)]
    request = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
    answered: list[tuple[int, float]] = []
    try:
        with selectors.DefaultSelector() as selector:
            started = time.monotonic()
            for s in socks:
                s.sendall(request)
            heads = {s: b"" for s in socks}
            for s in socks:
                selector.register(s, selectors.EVENT_READ)
            while len(answered) < n:
                ready = selector.select(timeout=10)
                assert ready, f"no answer within 10 s; answered: {answered}"
                for key, _ in ready:
                    s = key.fileobj
                    assert isinstance(s, socket.socket)
                    chunk = s.recv(65536)
                    heads[s] += chunk
                    if b"\r\n" in heads[s] or not chunk:
                        line = heads[s].split(b"\r\n", 1)[0]
                        assert line.startswith(b"HTTP/1.1 "), heads[s]
                        answered.append((int(line.split()[1]), time.monotonic() - started))
                        selector.unregister(s)
    finally:
        for s in socks:
            s.close()
    return answered


os.environ.setdefault("NO_PROXY", "*")
