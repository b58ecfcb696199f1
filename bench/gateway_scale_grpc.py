"""``bench.gateway_scale --kind grpc``: 1,000 GRPCRoutes on one Gateway's HTTP
listener, called over h2c (HTTP/2 with prior knowledge, as gRPC clients call
an HTTP listener; on Debian's NGINX 1.22 through the stream block's hop).

GRPCRoute ``g<i>`` serves ``g<i>.bench.test``: ``helloworld.Greeter/SayHello``
(an Exact service and method) to greeter ``a`` and the rest of the service to
``a`` too, each greeter a grpcio server answering its name
(``testkit.grpc_greeter``). The change moves the route's calls to greeter
``b``; a deleted route's calls are UNIMPLEMENTED (no route: 404).
"""

from __future__ import annotations

import time
from typing import Any

import grpc

from bench.processes import Ferryman, free_port, write_yaml
from testkit.grpc_greeter import METHOD, SERVICE, Greeter, call_h2c


def grpc_route(i: int, backend: str = "a") -> dict[str, Any]:
    def to(**method: str) -> dict[str, Any]:
        return {
            "matches": [{"method": method}],
            "backendRefs": [{"name": backend, "port": 50051}],
        }

    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "GRPCRoute",
        "metadata": {"name": f"g{i}", "namespace": "default"},
        "spec": {
            "parentRefs": [{"name": "bench"}],
            "hostnames": [f"g{i}.bench.test"],
            "rules": [to(service=SERVICE, method="SayHello"), to(service=SERVICE)],
        },
    }


def scale_grpc(f: Ferryman, n: int, samples: int, address: str) -> dict[str, Any]:
    greeters = {name: Greeter(name) for name in ("a", "b")}
    try:
        return _scale_grpc(f, n, samples, address, greeters)
    finally:
        for greeter in greeters.values():
            greeter.close()


def _scale_grpc(
    f: Ferryman, n: int, samples: int, address: str, greeters: dict[str, Greeter]
) -> dict[str, Any]:
    # Imported here: gateway_scale imports this module for --kind grpc.
    from bench.gateway_scale import _changes, _summary, gateway_docs, service
    from bench.run import _wait

    listen = free_port()
    docs = gateway_docs({"name": "http", "port": listen, "protocol": "HTTP"})
    for name, greeter in greeters.items():
        docs += service(name, 50051, greeter.port)
    write_yaml(f.manifests / "base.yaml", docs)
    for i in range(n):
        write_yaml(f.manifests / f"g{i}.yaml", [grpc_route(i)])
    result: dict[str, Any] = {"grpc_routes": n, "ready_s": round(f.start(), 3)}

    def answer(i: int) -> str:
        """The greeter that answered ``g<i>.bench.test``, the status's name else."""
        code, name = call_h2c(address, listen, f"g{i}.bench.test", METHOD)
        return name if code == grpc.StatusCode.OK else code.name

    started = time.monotonic()
    _wait(lambda: answer(n - 1) == "a", 300, "the last route", interval=0.05)
    result["last_route_after_ready_s"] = round(time.monotonic() - started, 3)
    result["startup_reloads"] = f.reloads()
    result.update({k: round(v, 1) for k, v in f.memory().items()})
    times = _changes(
        f, n, samples, "g",
        lambda i, changed: grpc_route(i, "b" if changed else "a"),
        lambda i: answer(i) == "a",
        lambda i: answer(i) == "b",
        lambda i: answer(i) == "UNIMPLEMENTED",
        "backend",
    )  # fmt: skip
    return _summary(f, result, times)
