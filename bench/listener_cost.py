"""What GlobalConfiguration HTTP listeners cost the hosts on the default ports.

    FERRYMAN_TEST_NGINX_MODULES_DIR=... .venv/bin/python -m bench.listener_cost \\
        [--requests 3000] [--rounds 3]

Two ferrymen serving the same plain Ingress, one with --global-configuration naming
a GlobalConfiguration with two HTTP listeners (nginx.conf then has the
``$ferryman_listener`` map, which the module evaluates per request to keep each
host to its listeners: docs/virtualserver.md, "Custom listeners"), one without.
(--global-configuration also loads the stream block for TransportServers: the
difference measured includes it.) The client is Python on the same machine, so
this bounds the cost rather than measuring it precisely. Prints, per round,
requests per second on one kept connection for both, alternating which goes first.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import httpx

from bench.processes import BackendNginx, alternating, free_port, ingress_docs, started_sides

HOST = "app0.bench.test"


def _kept(port: int, n: int) -> float:
    with httpx.Client(timeout=5) as c:
        started = time.monotonic()
        for _ in range(n):
            r = c.get(f"http://127.0.0.1:{port}/p1", headers={"Host": HOST})
            assert r.status_code == 200, r.status_code
        return n / (time.monotonic() - started)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ferryman-listeners-"))
    backends = BackendNginx(work / "backends", [free_port(), free_port()])
    gc = {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "GlobalConfiguration",
        "metadata": {"name": "gc", "namespace": "default"},
        "spec": {
            "listeners": [
                {"name": "http-a", "port": free_port(), "protocol": "HTTP"},
                {"name": "https-b", "port": free_port(), "protocol": "HTTP", "ssl": True},
            ]
        },
    }
    docs = ingress_docs(0, (backends.ports[0], backends.ports[1]))
    compared = {
        "plain": ([], docs),
        "listeners": (["--global-configuration", "default/gc"], [*docs, gc]),
    }
    try:
        with started_sides(work, compared) as sides:
            for r in range(args.rounds):
                for name in alternating(list(sides), r):
                    kept = _kept(sides[name].http_port, args.requests)
                    print(f"round {r} {name:10} kept requests/s {kept:6.0f}")
    finally:
        backends.stop()


if __name__ == "__main__":
    main()
