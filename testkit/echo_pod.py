"""One Gateway API conformance pod for the test kubelet: runs the suite's own
echo-basic (or, for an image the suite never sends traffic to, nothing) and
prints one line once it serves, which is the kubelet's readiness signal.

    python -m testkit.echo_pod ECHO_BINARY IP [PORT...]  # echo-basic
    python -m testkit.echo_pod - IP                     # an idle container

SIGTERM is passed on to echo-basic; this process ends with it.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _serving(ip: str, port: int) -> bool:
    try:
        socket.create_connection((ip, port), timeout=0.5).close()
    except OSError:
        return False
    return True


def _die_with_parent() -> None:
    """In the child: SIGTERM when this process ends (Linux prctl PR_SET_PDEATHSIG)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def main(argv: list[str]) -> int:
    binary, ip = argv[0], argv[1]
    if binary == "-":
        # An image no core test sends traffic to (coredns: its Corefile forwards
        # to the internet, so it must never run here): a process that is up.
        print("idle", flush=True)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        stop.wait()
        return 0
    # The kubelet's stop kills this process (SIGKILL): echo-basic must not outlive
    # it (hundreds were left running after test sessions).
    child = subprocess.Popen([binary], preexec_fn=_die_with_parent)
    signal.signal(signal.SIGTERM, lambda *_: child.terminate())
    # echo-basic serves port 3000 in every mode (HTTP, gRPC, the TCP echo),
    # whatever the container declares (tcp-backend declares none).
    port = int(os.environ.get("HTTP_PORT") or 3000)
    deadline = time.monotonic() + 30
    while child.poll() is None and time.monotonic() < deadline:
        if _serving(ip, port):
            print("serving", flush=True)
            break
        time.sleep(0.05)
    return child.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
