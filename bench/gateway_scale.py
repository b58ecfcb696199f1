"""1,000 HTTPRoutes (or TLSRoutes, or GRPCRoutes) on one Gateway: start-up, reloads, and
time-to-route for route creation, backend changes and deletion.

    .venv/bin/python -m bench.gateway_scale [--routes 1000] [--samples 30]
        [--kind http|tls|tls-terminate|grpc]

The Gateway takes 127.0.0.10 (``--gateway-addresses``) and listens on one
port; HTTPRoute ``r<i>`` serves ``r<i>.bench.test`` with three rules (a path
prefix to Service ``a``, a header match, and ``/`` split by weight between
``a`` and ``b``, whose backends answer their own port numbers).

- start-up: seconds from spawn to ready, then until the last route answers;
  reloads (the start-up ones only are expected), memory;
- time-to-route, each ``--samples`` times with all routes live: a new
  HTTPRoute until its host answers 200; a weight change (``a`` 1/``b`` 0 to
  0/1) until ``b`` answers; a deletion until 404. p50/p99 and the reloads
  they took (the target: none, p99 <= 0.5 s).

``--kind tls``: TLSRoute ``t<i>`` passes SNI name ``t<i>.bench.test`` through a
TLS listener (mode Passthrough) to TLS backend ``a`` (two of them,
``testkit.tls_backends``, each answering its name); the change moves a route
from ``a`` to ``b``, and a deleted route's name is closed.

``--kind tls-terminate``: the same TLSRoutes on a TLS listener of mode
Terminate, which ends TLS with its certificate (a ``*.bench.test`` Secret)
and passes plain HTTP to backends ``a`` and ``b`` of the HTTP runs (each
answering its port number).

``--kind grpc``: GRPCRoute ``g<i>`` for ``g<i>.bench.test``, called over h2c
(bench/gateway_scale_grpc.py); the change moves its calls to greeter ``b``,
a deleted route's calls are UNIMPLEMENTED.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from bench.gateway_scale_grpc import scale_grpc
from bench.processes import (
    Ferryman,
    bench_bed,
    endpoint_slices,
    free_port,
    get,
    write_yaml,
)
from bench.run import _percentile, _wait
from testkit.harness import tls_secret
from testkit.tls_backends import https, start_tls_backend

ADDRESS = "127.0.0.10"


def gateway_docs(listener: dict[str, Any]) -> list[dict[str, Any]]:
    """The GatewayClass and the one Gateway, with ``listener``."""
    return [
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GatewayClass",
            "metadata": {"name": "ferryman"},
            "spec": {"controllerName": "ferryman.io/gateway-controller"},
        },
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": "bench", "namespace": "default"},
            "spec": {"gatewayClassName": "ferryman", "listeners": [listener]},
        },
    ]


def service(name: str, port: int, endpoint_port: int) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"ports": [{"port": port, "name": "http"}]},
        },
        *endpoint_slices(name, (endpoint_port,)),
    ]


def base_docs(ports: tuple[int, int], listen: int) -> list[dict[str, Any]]:
    docs = gateway_docs({"name": "http", "port": listen, "protocol": "HTTP"})
    for name, port in zip(("a", "b"), ports, strict=True):
        docs += service(name, 80, port)
    return docs


def route(i: int, weights: tuple[int, int] = (1, 0)) -> dict[str, Any]:
    def backend(name: str, weight: int = 1) -> dict[str, Any]:
        return {"name": name, "port": 80, "weight": weight}

    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": f"r{i}", "namespace": "default"},
        "spec": {
            "parentRefs": [{"name": "bench"}],
            "hostnames": [f"r{i}.bench.test"],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/api"}}],
                    "backendRefs": [backend("a")],
                },
                {
                    "matches": [{"headers": [{"name": "x-canary", "value": "1"}]}],
                    "backendRefs": [backend("b")],
                },
                {"backendRefs": [backend("a", weights[0]), backend("b", weights[1])]},
            ],
        },
    }


def tls_docs(ports: dict[str, int], listen: int, terminate: bool) -> list[dict[str, Any]]:
    """The Gateway with one TLS listener, Services ``a`` and ``b`` on ``ports``."""
    tls: dict[str, Any] = {"mode": "Passthrough"}
    extra: list[dict[str, Any]] = []
    if terminate:
        tls = {"mode": "Terminate", "certificateRefs": [{"name": "bench-tls"}]}
        extra.append(tls_secret("bench-tls", ["*.bench.test"]))
    docs = gateway_docs({"name": "tls", "port": listen, "protocol": "TLS", "tls": tls}) + extra
    for name, port in ports.items():
        docs += service(name, 8443, port)
    return docs


def tls_route(i: int, backend: str = "a") -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "TLSRoute",
        "metadata": {"name": f"t{i}", "namespace": "default"},
        "spec": {
            "parentRefs": [{"name": "bench"}],
            "hostnames": [f"t{i}.bench.test"],
            "rules": [{"backendRefs": [{"name": backend, "port": 8443}]}],
        },
    }


def _timed(action: Any, check: Any, what: str) -> float:
    started = time.monotonic()
    action()
    _wait(check, 60, what, interval=0.01)
    return time.monotonic() - started


def scale(f: Ferryman, n: int, samples: int, ports: tuple[int, int]) -> dict[str, Any]:
    listen = free_port()
    write_yaml(f.manifests / "base.yaml", base_docs(ports, listen))
    for i in range(n):
        write_yaml(f.manifests / f"r{i}.yaml", [route(i)])
    result: dict[str, Any] = {"routes": n, "rules_each": 3, "ready_s": round(f.start(), 3)}

    def answer(i: int, path: str = "/") -> tuple[int, str]:
        return get(f"http://{ADDRESS}:{listen}{path}", host=f"r{i}.bench.test", timeout=5)

    started = time.monotonic()
    _wait(lambda: answer(n - 1)[0] == 200, 300, "the last route", interval=0.05)
    result["last_route_after_ready_s"] = round(time.monotonic() - started, 3)
    result["startup_reloads"] = f.reloads()
    result.update({k: round(v, 1) for k, v in f.memory().items()})
    b = str(ports[1])
    times = _changes(
        f, n, samples, "r",
        lambda i, changed: route(i, (0, 1) if changed else (1, 0)),
        lambda i: answer(i)[0] == 200,
        lambda i: answer(i)[1].strip() == b,
        lambda i: answer(i)[0] == 404,
        "weight",
    )  # fmt: skip
    return _summary(f, result, times)


def _changes(
    f: Ferryman,
    first: int,
    samples: int,
    prefix: str,
    make: Callable[[int, bool], dict[str, Any]],
    live: Callable[[int], bool],
    changed: Callable[[int], bool],
    gone: Callable[[int], bool],
    change: str,
) -> dict[str, list[float]]:
    """Each sample: a new route until ``live``, its change until ``changed``,
    its deletion until ``gone``, with all the others live."""
    times: dict[str, list[float]] = {"create": [], change: [], "delete": []}
    for i in range(first, first + samples):
        path = f.manifests / f"{prefix}{i}.yaml"
        created = partial(write_yaml, path, [make(i, False)])
        times["create"].append(_timed(created, partial(live, i), "create"))
        edited = partial(write_yaml, path, [make(i, True)])
        times[change].append(_timed(edited, partial(changed, i), change))
        times["delete"].append(_timed(path.unlink, partial(gone, i), "delete"))
    return times


def _summary(f: Ferryman, result: dict[str, Any], times: dict[str, list[float]]) -> dict[str, Any]:
    for what, values in times.items():
        result[f"{what}_p50_s"] = round(statistics.median(values), 3)
        result[f"{what}_p99_s"] = round(_percentile(values, 0.99), 3)
    result["reloads_after_startup"] = f.reloads() - result["startup_reloads"]
    return result


def scale_tls(
    f: Ferryman, n: int, samples: int, plain: tuple[int, int] | None = None
) -> dict[str, Any]:
    """``plain``: the ports of plain HTTP backends ``a`` and ``b`` behind a
    listener ending TLS (mode Terminate); None: TLS backends of its own,
    passed through."""
    if plain is not None:
        names = {"a": str(plain[0]), "b": str(plain[1])}
        return _scale_tls(f, n, samples, {"a": plain[0], "b": plain[1]}, names)
    backends = {name: start_tls_backend(name, ["*.bench.test"]) for name in ("a", "b")}
    try:
        ports = {name: b.port for name, b in backends.items()}
        return _scale_tls(f, n, samples, ports, {"a": "a", "b": "b"})
    finally:
        for backend in backends.values():
            backend.close()


def _scale_tls(
    f: Ferryman, n: int, samples: int, ports: dict[str, int], says: dict[str, str]
) -> dict[str, Any]:
    """``says``: what backends ``a`` and ``b`` answer (the response's last word)."""
    listen = free_port()
    terminate = says["a"] != "a"
    write_yaml(f.manifests / "base.yaml", tls_docs(ports, listen, terminate))
    for i in range(n):
        write_yaml(f.manifests / f"t{i}.yaml", [tls_route(i)])
    key = "tls_terminate_routes" if terminate else "tls_routes"
    result: dict[str, Any] = {key: n, "ready_s": round(f.start(), 3)}

    def answer(i: int) -> str:
        """What answered SNI ``t<i>.bench.test``, "" when closed."""
        try:
            response = https(listen, f"t{i}.bench.test", ADDRESS)[1].strip()
        except OSError:
            return ""
        return response.rsplit(" ", 1)[-1].rsplit("\n", 1)[-1].strip() if response else ""

    started = time.monotonic()
    _wait(lambda: answer(n - 1) == says["a"], 300, "the last route", interval=0.05)
    result["last_route_after_ready_s"] = round(time.monotonic() - started, 3)
    result["startup_reloads"] = f.reloads()
    result.update({k: round(v, 1) for k, v in f.memory().items()})
    times = _changes(
        f, n, samples, "t",
        lambda i, changed: tls_route(i, "b" if changed else "a"),
        lambda i: answer(i) == says["a"],
        lambda i: answer(i) == says["b"],
        lambda i: answer(i) == "",
        "backend",
    )  # fmt: skip
    return _summary(f, result, times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--routes", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--kind", choices=("http", "tls", "tls-terminate", "grpc"), default="http")
    args = ap.parse_args()
    with bench_bed(
        "fbench-gateway-", extra_args=["--enable-gateway-api", "--gateway-addresses", ADDRESS]
    ) as (_work, backends, f):
        if args.kind == "tls":
            print(scale_tls(f, args.routes, args.samples))
        elif args.kind == "tls-terminate":
            plain = (backends.ports[0], backends.ports[1])
            print(scale_tls(f, args.routes, args.samples, plain))
        elif args.kind == "grpc":
            print(scale_grpc(f, args.routes, args.samples, ADDRESS))
        else:
            print(scale(f, args.routes, args.samples, (backends.ports[0], backends.ports[1])))


if __name__ == "__main__":
    main()
