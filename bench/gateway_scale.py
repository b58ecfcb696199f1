"""1,000 HTTPRoutes on one Gateway: start-up, reloads, and time-to-route for
route creation, backend weight changes and deletion.

    .venv/bin/python -m bench.gateway_scale [--routes 1000] [--samples 30]

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
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from bench.processes import (
    Ferryman,
    bench_bed,
    endpoint_slices,
    free_port,
    get,
    write_yaml,
)
from bench.run import _percentile, _wait

ADDRESS = "127.0.0.10"


def base_docs(ports: tuple[int, int], listen: int) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [
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
            "spec": {
                "gatewayClassName": "ferryman",
                "listeners": [{"name": "http", "port": listen, "protocol": "HTTP"}],
            },
        },
    ]
    for name, port in zip(("a", "b"), ports, strict=True):
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"ports": [{"port": 80, "name": "http"}]},
            }
        )
        docs += endpoint_slices(name, (port,))
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
    times: dict[str, list[float]] = {"create": [], "weight": [], "delete": []}
    for s in range(samples):
        i = n + s
        path = f.manifests / f"r{i}.yaml"
        times["create"].append(
            _timed(
                lambda i=i, path=path: write_yaml(path, [route(i)]),  # type: ignore[misc]
                lambda i=i: answer(i)[0] == 200,  # type: ignore[misc]
                "create",
            )
        )
        times["weight"].append(
            _timed(
                lambda i=i, path=path: write_yaml(path, [route(i, (0, 1))]),  # type: ignore[misc]
                lambda i=i: answer(i)[1].strip() == b,  # type: ignore[misc]
                "weight",
            )
        )
        times["delete"].append(
            _timed(
                lambda path=path: path.unlink(),  # type: ignore[misc]
                lambda i=i: answer(i)[0] == 404,  # type: ignore[misc]
                "delete",
            )
        )
    for what, values in times.items():
        result[f"{what}_p50_s"] = round(statistics.median(values), 3)
        result[f"{what}_p99_s"] = round(_percentile(values, 0.99), 3)
    result["reloads_after_startup"] = f.reloads() - result["startup_reloads"]
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--routes", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=30)
    args = ap.parse_args()
    with bench_bed(
        "fbench-gateway-", extra_args=["--enable-gateway-api", "--gateway-addresses", ADDRESS]
    ) as (_work, backends, f):
        print(scale(f, args.routes, args.samples, (backends.ports[0], backends.ports[1])))


if __name__ == "__main__":
    main()
