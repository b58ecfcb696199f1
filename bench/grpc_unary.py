"""gRPC through ferryman (a VirtualServer upstream with ``type: grpc``, served
from ``@ferryman_grpc``, kinds/virtualserver/records/grpc.py): how soon a new gRPC route
answers, whether it reloads, and what the hop costs a unary call.

    .venv/bin/python -m bench.grpc_unary [--calls 2000]

A real grpcio greeter (testkit/grpc_greeter.py) and a real ferryman
with the ConfigMap's http2 and a TLS host; the VirtualServer is written after
the start. Prints, for ``--calls`` sequential unary calls on one channel
(Python's client, so the client's own cost is part of both): calls per second,
p50 and p99, straight to the greeter and through ferryman (TLS, HTTP/2, the
Lua slow path, grpc_pass); the time from writing the VirtualServer to the first
answered call (manifests-directory watch included); and the reloads counted.
Numbers on a shared 2-core machine.
"""

from __future__ import annotations

import argparse
import base64
import tempfile
import time
from pathlib import Path

import grpc

from testkit.grpc_greeter import METHOD, Greeter, decode, encode
from testkit.harness import Ferryman, eventually, service_with_backends, tls_secret

HOST = "grpc.bench"


def _calls(channel: grpc.Channel, n: int) -> tuple[float, float, float]:
    """Calls per second, p50 and p99 in ms."""
    call = channel.unary_unary(METHOD, request_serializer=encode, response_deserializer=decode)
    call("warm", timeout=10)
    took = []
    start = time.perf_counter()
    for _ in range(n):
        t = time.perf_counter()
        call("x", timeout=10)
        took.append(time.perf_counter() - t)
    total = time.perf_counter() - start
    took.sort()
    return n / total, took[len(took) // 2] * 1e3, took[int(len(took) * 0.99)] * 1e3


def _virtual_server() -> dict[str, object]:
    upstream = {"name": "g", "service": "greeter", "port": 50051, "type": "grpc"}
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": {"name": "bench", "namespace": "default"},
        "spec": {
            "host": HOST,
            "tls": {"secret": "bench-tls"},
            "upstreams": [upstream],
            "routes": [{"path": "/", "action": {"pass": "g"}}],
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    greeter = Greeter("greeter")
    f = Ferryman(Path(tempfile.mkdtemp(prefix="ferryman-grpc-")))
    try:
        with grpc.insecure_channel(f"127.0.0.1:{greeter.port}") as channel:
            direct = _calls(channel, args.calls)
        f.extra_args += ["--nginx-configmaps", "default/nginx-config"]
        md = {"name": "nginx-config", "namespace": "default"}
        configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": md}
        f.write("configmap", {**configmap, "data": {"http2": "true"}})
        secret = tls_secret("bench-tls", [HOST])
        f.write("secret", secret)
        f.write("svc", service_with_backends("greeter", [greeter], port=50051))  # type: ignore[list-item]
        f.start()
        credentials = grpc.ssl_channel_credentials(
            root_certificates=base64.b64decode(secret["data"]["tls.crt"])
        )
        options = [("grpc.ssl_target_name_override", HOST), ("grpc.default_authority", HOST)]
        target = f"127.0.0.1:{f.https_port}"

        def answered() -> bool:
            try:
                with grpc.secure_channel(target, credentials, options=options) as channel:
                    unary = channel.unary_unary(
                        METHOD, request_serializer=encode, response_deserializer=decode
                    )
                    unary("x", timeout=2)
                return True
            except grpc.RpcError:
                return False

        written = time.perf_counter()
        f.write("vs", _virtual_server())
        eventually(answered, 30, "the gRPC route answers")
        live = time.perf_counter() - written
        with grpc.secure_channel(target, credentials, options=options) as channel:
            through = _calls(channel, args.calls)
        reloads = f.reloads()
    finally:
        if f.proc is not None:
            f.stop()
        greeter.close()
    print(f"unary calls, {args.calls} sequential on one channel:")
    for name, (rate, p50, p99) in (("direct", direct), ("via ferryman", through)):
        print(f"  {name:13} {rate:6.0f} calls/s  p50 {p50:.2f} ms  p99 {p99:.2f} ms")
    print(f"VirtualServer written -> first answered call: {live:.2f} s")
    print(f"reloads: {reloads} (1 is the start)")
    print(f"command: .venv/bin/python -m bench.grpc_unary --calls {args.calls}")


if __name__ == "__main__":
    main()
