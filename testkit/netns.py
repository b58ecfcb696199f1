"""Backends on a test host of our own: a network namespace joined by a veth pair.

The API server refuses loopback addresses in EndpointSlices, so backends for
Kubernetes-mode tests live in a namespace this test run creates, on a /30 link
that exists only inside this machine. Needs root and iproute2.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from testkit.harness import RemoteBackend

ROOT = Path(__file__).resolve().parents[1]


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


# The namespaces test runs make, each named with its process's pid.
_OWNED = (re.compile(r"^ferryman-.+-(\d+)$"), re.compile(r"^fm-(?:node|pod)-(\d+)-\d+$"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_stale() -> None:
    """Remove the network namespaces of test runs that are gone (killed before
    their teardown): their processes killed, the namespaces deleted. Subnets
    are chosen by pid, so a dead run's link and route could otherwise shadow
    this run's (its pods' addresses answering "connection refused")."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for line in listed.splitlines():
        name = line.split(" ", 1)[0]
        owner = next((m for r in _OWNED if (m := r.match(name))), None)
        if owner is None or _alive(int(owner.group(1))):
            continue
        pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True)
        for pid in pids.stdout.split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


def free_subnet(first: str, n: int) -> int:
    """The third octet, from ``n`` up, of a /24 under ``first`` (``10.232``) that no
    route of this machine uses (another live run's, chosen by its pid too)."""
    routes = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True).stdout
    used = set(re.findall(rf"^{re.escape(first)}\.(\d+)\.", routes, re.MULTILINE))
    for k in range(250):
        candidate = (n - 1 + k) % 250 + 1
        if str(candidate) not in used:
            return candidate
    return n


class BackendHost:
    """``name``, ``prefix`` (of the veth names) and ``net`` tell apart two hosts of one run."""

    def __init__(self, name: str = "test", prefix: str = "fm", net: str = "10.231") -> None:
        n = os.getpid() % 250 + 1
        self.netns = f"ferryman-{name}-{os.getpid()}"
        self.host_if = f"{prefix}h{os.getpid()}"[:15]
        self.peer_if = f"{prefix}p{os.getpid()}"[:15]
        self.host_address, self.address = f"{net}.{n}.1", f"{net}.{n}.2"
        self.backends: list[RemoteBackend] = []

    def create(self) -> None:
        reap_stale()
        _ip("netns", "add", self.netns)
        _ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.peer_if)
        _ip("link", "set", self.peer_if, "netns", self.netns)
        _ip("addr", "add", f"{self.host_address}/30", "dev", self.host_if)
        _ip("link", "set", self.host_if, "up")
        _ip("netns", "exec", self.netns, "ip", "addr", "add", f"{self.address}/30", "dev",
            self.peer_if)  # fmt: skip
        _ip("netns", "exec", self.netns, "ip", "link", "set", self.peer_if, "up")
        _ip("netns", "exec", self.netns, "ip", "link", "set", "lo", "up")

    def start(self, name: str) -> RemoteBackend:
        proc = subprocess.Popen(
            ["ip", "netns", "exec", self.netns, sys.executable, "-c",
             "import sys; from testkit.harness import serve_echo; "
             "serve_echo(sys.argv[1], sys.argv[2])", name, self.address],
            cwd=ROOT, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        backend = RemoteBackend(name, self.address, port, proc)
        self.backends.append(backend)
        return backend

    def stop_backends(self) -> None:
        for b in self.backends:
            b.proc.kill()
            b.proc.wait()
        self.backends.clear()

    def destroy(self) -> None:
        self.stop_backends()
        subprocess.run(["ip", "link", "del", self.host_if], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.netns], capture_output=True)
