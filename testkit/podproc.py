"""The "container" the test kubelet runs for a pod: echo backends answering with the pod's name.

    python -m testkit.podproc NAME ADDRESS PORT [PORT...]

Starts listening after ``START_DELAY`` seconds (env, default 0), as an
application that loads before it serves, and prints ``ready`` once every port
listens (the kubelet's readiness signal for a container without a probe).
On SIGTERM it keeps serving for ``TERM_DELAY`` seconds (env, default 0) and
then exits 0, like an application that drains before it stops; a kubelet
whose grace period is shorter kills it first.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from types import FrameType

from testkit.harness import _EchoServer


def main(argv: list[str]) -> None:
    name, address, *ports = argv
    time.sleep(float(os.environ.get("START_DELAY") or 0))
    servers = [_EchoServer(name, address, int(p)) for p in ports]
    for s in servers[1:]:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    delay = float(os.environ.get("TERM_DELAY") or 0)

    def on_term(signum: int, frame: FrameType | None) -> None:
        def stop() -> None:
            time.sleep(delay)
            os._exit(0)

        threading.Thread(target=stop, daemon=True).start()

    signal.signal(signal.SIGTERM, on_term)
    print("ready", flush=True)
    servers[0].serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
