"""A vanished endpoint costs a retry, not a hang (issue 32, item 2).

A pod that is gone while its address is still routed answers nothing: SYNs are
dropped, no RST comes back. The black hole here is a network namespace of this
run whose firewall drops every TCP packet; the other endpoint is a live backend.
NGINX's own connect timeout is 60 s; ferryman's default moves a request on to
the live endpoint after DEFAULT_PROXY_CONNECT_TIMEOUT (proxy_next_upstream error
timeout), well before a client gives up.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import httpx
import pytest

from ferryman.configs.configmap import DEFAULT_PROXY_CONNECT_TIMEOUT
from ferryman.resources.annotation_values import parse_time_ms
from testkit.harness import (
    Backends,
    Ferryman,
    ingress,
    path,
    rule,
    service_with_backends,
)
from testkit.netns import BackendHost

HOST = "vanished.test"
# What a request may take beyond one connect timeout: the live backend's answer
# on a busy machine. Far below NGINX's 60 s, which the test tells apart.
MARGIN_S = 8.0


class _Hole:
    """An address:port that drops every SYN (a deleted pod's address)."""

    name = "gone"
    port = 8080

    def __init__(self, host: BackendHost) -> None:
        self.address = host.address


@pytest.fixture
def black_hole() -> Iterator[_Hole]:
    host = BackendHost("blackhole", "bh", "10.232")
    host.create()
    try:
        subprocess.run(
            ["ip", "netns", "exec", host.netns, "iptables", "-A", "INPUT", "-p", "tcp", "-j",
             "DROP"],
            check=True, capture_output=True,
        )  # fmt: skip
        yield _Hole(host)
    finally:
        host.destroy()


def _start(f: Ferryman, backends: Backends, hole: _Hole, annotations: dict[str, str]) -> None:
    live = backends.start("live")
    f.write("svc", service_with_backends("app", [live, hole]))  # type: ignore[list-item]
    f.write("ing", ingress("app", [rule(HOST, path("/", "app"))], annotations=annotations))
    f.start()


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_black_holed_endpoint_costs_one_connect_timeout(
    either_fast_path: Ferryman, backends: Backends, black_hole: _Hole, method: str
) -> None:
    """Every request answers 200 from the live endpoint within the default
    connect timeout plus a margin; max-fails 0 keeps the dead peer in the
    rotation, so half the requests try it first. A POST moves on as well: a
    connect that failed sent nothing."""
    f = either_fast_path
    _start(f, backends, black_hole, {"nginx.org/max-fails": "0"})
    limit = parse_time_ms(DEFAULT_PROXY_CONNECT_TIMEOUT) / 1000 + MARGIN_S
    timings = []
    with httpx.Client(timeout=limit) as client:
        for _ in range(4):
            began = time.monotonic()
            r = client.request(
                method, f"http://127.0.0.1:{f.http_port}/", headers={"Host": HOST}, content=b"x"
            )
            timings.append(time.monotonic() - began)
            assert (r.status_code, r.json()["name"]) == (200, "live")
    # Round-robin over two peers: at least one request met the black hole first.
    assert max(timings) >= parse_time_ms(DEFAULT_PROXY_CONNECT_TIMEOUT) / 1000 * 0.9


def test_the_annotation_overrides_the_default_connect_timeout(
    ferryman: Ferryman, backends: Backends, black_hole: _Hole
) -> None:
    """nginx.org/proxy-connect-timeout (NIC's) sets a route's own: shorter here."""
    _start(
        ferryman,
        backends,
        black_hole,
        {"nginx.org/max-fails": "0", "nginx.org/proxy-connect-timeout": "200ms"},
    )
    with httpx.Client(timeout=parse_time_ms(DEFAULT_PROXY_CONNECT_TIMEOUT) / 1000) as client:
        for _ in range(4):
            r = client.get(f"http://127.0.0.1:{ferryman.http_port}/", headers={"Host": HOST})
            assert (r.status_code, r.json()["name"]) == (200, "live")
