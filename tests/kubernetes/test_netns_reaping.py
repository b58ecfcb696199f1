"""The test host's network namespaces: a killed run's are reaped before a new
one makes its own, and a subnet another live run routes is not taken again
(testkit/netns.py). Both once made every Gateway conformance backend answer
"connection refused": a dead run's route to the same pod subnet won."""

from __future__ import annotations

import os
import subprocess

from testkit.netns import free_subnet, reap_stale


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=False)


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_a_dead_runs_namespace_and_route_are_reaped() -> None:
    pid = _dead_pid()
    ns, host = f"fm-node-{pid}-0", f"fnh{pid}x9"[:15]
    _ip("netns", "add", ns)
    _ip("link", "add", host, "type", "veth", "peer", "name", "fnpreap")
    _ip("link", "set", "fnpreap", "netns", ns)
    _ip("addr", "add", "10.239.77.1/24", "dev", host)
    _ip("link", "set", host, "up")
    try:
        assert "10.239.77.0/24" in _ip("-4", "route").stdout
        assert free_subnet("10.239", 77) != 77
        reap_stale()
        assert ns not in _ip("netns", "list").stdout
        assert "10.239.77.0/24" not in _ip("-4", "route").stdout
        assert free_subnet("10.239", 77) == 77
    finally:
        _ip("link", "del", host)
        _ip("netns", "del", ns)


def test_a_live_runs_namespace_is_kept() -> None:
    ns = f"fm-pod-{os.getpid()}-999"
    _ip("netns", "add", ns)
    try:
        reap_stale()
        assert ns in _ip("netns", "list").stdout
    finally:
        _ip("netns", "del", ns)
