"""Requests in flight through the data plane now: per peer and for the whole replica.

Why: a machine is deleted only once nothing goes on there, so "drained" must be
a measurement, not a wait. The NGINX flavour counts per peer in
ngx_http_ferryman_module (each attempt from the balancer's get to its free)
and answers on the push socket's ``GET /in-flight``; the replica's count is
stub_status's ``Writing``. The same on every server (NGINX 1.22, 1.30, Angie).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class InFlight:
    """One reading. ``peers``: ``addr:port`` as NGINX's ``$upstream_addr`` writes
    it (``10.0.0.1:8080``, ``[fd00::1]:80``) -> requests in flight to it now,
    peers with none left out. ``replica``: requests this replica's NGINX is
    serving now, whatever their route, the one that asked excluded.
    ``peers_measured``: False when this data plane cannot tell per peer now
    (NGINX without ferryman's module, or a worker of an earlier configuration
    still serving requests): then
    ``peers`` says nothing, and no peer may be taken as drained from it.
    """

    peers: Mapping[str, int] = field(default_factory=dict)
    replica: int = 0
    peers_measured: bool = True

    def to(self, addresses: Iterable[str]) -> int:
        """Requests in flight to the peers at these addresses (any port); an
        address matches however it is spelled (``fd00:0::1`` is ``fd00::1``)."""
        wanted = {_canonical(a) for a in addresses}
        return sum(n for name, n in self.peers.items() if _canonical(host_of(name)) in wanted)


class InFlightReader(Protocol):
    """What can tell requests in flight: ``NginxManager``, ``AngieDataPlane``,
    ``FakeDataPlane``."""

    async def in_flight(self) -> InFlight:
        """Raises ``DataPlaneError`` when the data plane does not answer."""
        ...


def host_of(name: str) -> str:
    """``10.0.0.1:8080`` -> ``10.0.0.1``; ``[fd00::1]:80`` -> ``fd00::1``."""
    host = name.rpartition(":")[0]
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def _canonical(address: str) -> str:
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        return address


def parse_peer_counts(text: str) -> dict[str, int] | None:
    """The answer of ferryman.lua's ``GET /in-flight``: ``measured`` then
    ``<name> <count>`` lines -> counts; None for ``unmeasured``; ValueError for
    anything else."""
    lines = text.splitlines()
    if lines == ["unmeasured"]:
        return None
    if not lines or lines[0] != "measured":
        raise ValueError(f"not an in-flight answer: {text[:200]!r}")
    peers: dict[str, int] = {}
    for line in lines[1:]:
        name, _, count = line.rpartition(" ")
        if not name or not count.isdigit():
            raise ValueError(f"not an in-flight line: {line[:200]!r}")
        if int(count) > 0:
            peers[name] = int(count)
    return peers
