"""What --enable-tls-passthrough costs the HTTPS hosts NGINX still terminates.

    FERRYMAN_TEST_NGINX_MODULES_DIR=... .venv/bin/python -m bench.passthrough_cost \\
        [--requests 2000] [--rounds 3]

Two ferrymen serving the same TLS Ingress, one with --enable-tls-passthrough (the
HTTPS port is then a stream server reading the SNI, and terminated hosts cross an
internal unix hop with the PROXY protocol). Prints, per round, new TLS connections
per second (a handshake and one request each) and requests per second on one kept
connection, for both, alternating which goes first.
"""

from __future__ import annotations

import argparse
import base64
import ssl
import tempfile
import time
from pathlib import Path

import httpx

from bench.processes import BackendNginx, alternating, free_port, ingress_docs, started_sides
from ferryman.dataplane.fallback import self_signed

HOST = "app0.bench.test"


def _context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def _new_connections(port: int, n: int) -> float:
    context = _context()  # one: making a context costs more than a handshake
    started = time.monotonic()
    for _ in range(n):
        with httpx.Client(verify=context, timeout=5) as c:
            c.get(
                f"https://127.0.0.1:{port}/",
                headers={"Host": HOST},
                extensions={"sni_hostname": HOST},
            )
    return n / (time.monotonic() - started)


def _kept(port: int, n: int) -> float:
    with httpx.Client(verify=_context(), timeout=5) as c:
        started = time.monotonic()
        for _ in range(n):
            c.get(
                f"https://127.0.0.1:{port}/",
                headers={"Host": HOST},
                extensions={"sni_hostname": HOST},
            )
        return n / (time.monotonic() - started)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ferryman-passthrough-"))
    work.chmod(0o711)  # NGINX's workers (nobody, when run as root) reach tls.sock
    backends = BackendNginx(work / "backends", [free_port(), free_port()])
    key, crt = self_signed([HOST], days=1)
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": "tls", "namespace": "default"},
        "data": {
            "tls.crt": base64.b64encode(crt).decode(),
            "tls.key": base64.b64encode(key).decode(),
        },
    }
    docs = ingress_docs(0, (backends.ports[0], backends.ports[1]))
    for d in docs:
        if d["kind"] == "Ingress":
            d["spec"]["tls"] = [{"hosts": [HOST], "secretName": "tls"}]
    compared = {
        "plain": ([], [*docs, secret]),
        "passthrough": (["--enable-tls-passthrough"], [*docs, secret]),
    }
    try:
        with started_sides(work, compared) as sides:
            for r in range(args.rounds):
                for name in alternating(list(sides), r):
                    port = sides[name].https_port
                    new = _new_connections(port, args.requests // 4)
                    kept = _kept(port, args.requests)
                    print(f"round {r} {name:12} new TLS connections/s {new:6.0f}", end="")
                    print(f"  kept requests/s {kept:6.0f}")
    finally:
        backends.stop()


if __name__ == "__main__":
    main()
