"""Service + EndpointSlices -> the peers one backend key routes to.

Only endpoints whose ``ready`` condition is not false receive traffic. A port
referenced by number is looked up among the Service's ports; its name then
selects the EndpointSlice port of the same name (unnamed single-port Services
use the name ""), exactly as kube-proxy does.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from ferryman.resources.service import EndpointSlice, Service


class Peer(NamedTuple):
    address: str
    port: int


def resolve_peers(
    service: Service | None, slices: Iterable[EndpointSlice], port_ref: int | str
) -> tuple[Peer, ...]:
    if service is None:
        return ()
    sport = service.find_port(port_ref)
    if sport is None:
        return ()
    peers: set[Peer] = set()
    for s in slices:
        if s.address_type not in ("IPv4", "IPv6"):
            continue
        number = s.ports.get(sport.name)
        if number is None:
            continue
        for e in s.endpoints:
            if e.ready:
                peers.update(Peer(a, number) for a in e.addresses)
    return tuple(sorted(peers))


def port_ref_of(text: str) -> int | str:
    """Backend keys carry the port as text; digits mean a port number."""
    return int(text) if text.isascii() and text.isdigit() else text
