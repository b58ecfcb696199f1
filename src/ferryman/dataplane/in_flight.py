"""Requests in flight through the data plane now: per peer and for the whole replica.

Why: a machine is deleted only once nothing goes on there, so "drained" must be
a measurement, not a wait. The NGINX flavour counts per peer in
ngx_http_ferryman_module (each attempt from the balancer's get to its free)
and answers on the push socket's ``GET /in-flight``; the replica's count is
stub_status's ``Writing``. Angie's flavour reads its ``/status/`` API.
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
    (NGINX without ferryman's module; Angie while a peer that left an upstream,
    or a worker of an earlier configuration, still serves requests): then
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


def _count(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"not a count: {value!r}")
    return value


def _mapping(value: object, what: str) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{what}: not an object")
    return value


def angie_peer_counts(upstreams: object) -> tuple[dict[str, int], bool]:
    """Angie's ``/status/http/upstreams/`` -> (peer -> ``selected.current``,
    summed over the upstreams naming it, nonzero only; whether that is all).

    ``selected.current`` is the peer's ``conns``: incremented by the balancer's
    get and decremented by its free, as the module counts. A peer DNS took out
    of an upstream while requests to it were in flight lives on unnamed, as one
    of the upstream's ``zombies``: while there are any, the counts are not all.
    """
    peers: dict[str, int] = {}
    complete = True
    for name, upstream in _mapping(upstreams, "upstreams").items():
        u = _mapping(upstream, f"upstream {name}")
        if _count(u.get("zombies", 0)) > 0:
            complete = False
        for peer, stats in _mapping(u.get("peers", {}), f"upstream {name} peers").items():
            selected = _mapping(_mapping(stats, f"peer {peer}").get("selected"), "selected")
            current = _count(selected.get("current"))
            if current:
                peers[peer] = peers.get(peer, 0) + current
    return peers, complete


def angie_replica_count(server_zones: object) -> int:
    """Angie's ``/status/http/server_zones/`` -> requests in flight through the
    public servers (``status_zone ferryman``: every server ferryman renders).

    ``requests.processing`` is counted where stub_status's ``Writing`` is (from
    the request's header being read to the request being freed), but per
    server zone: the status API's own request, on a server without a zone, is
    not in it. ``connections.active - idle`` would count connections, and one
    HTTP/2 connection carries many requests.
    """
    zones = _mapping(server_zones, "server_zones")
    return sum(
        _count(_mapping(_mapping(z, "zone").get("requests"), "requests").get("processing"))
        for z in zones.values()
    )
