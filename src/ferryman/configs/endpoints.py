"""Service + EndpointSlices -> the peers one backend key routes to.

Endpoints that are ready and not terminating receive traffic. When a Service
port has none, its serving-but-terminating endpoints do (pods being deleted that
still answer), as kube-proxy does since Kubernetes 1.26: a rollout or a scale to
zero that takes every ready pod away at once then drains instead of answering
503. Endpoints that are not serving never receive traffic.

Readiness gates add one exception: an address in ``routable`` (its pod is Ready
in all but ferryman's own readiness gate, see ``resources/pod.py``) is routed
to as if its endpoint were ready, as long as it is not terminating: the gate
turns True only once ferryman routes to the pod, so waiting for Ready would
wait forever.

A port referenced by number is looked up among the Service's ports; its name
then selects the EndpointSlice port of the same name (unnamed single-port
Services use the name ""), exactly as kube-proxy does.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import NamedTuple

from ferryman.resources.service import EndpointSlice, Service


class Peer(NamedTuple):
    address: str
    port: int


def resolve_peers(
    service: Service | None,
    slices: Iterable[EndpointSlice],
    port_ref: int | str,
    routable: Collection[str] = frozenset(),
    leaving: Collection[str] = frozenset(),
) -> tuple[Peer, ...]:
    """The peers of ``service``'s port ``port_ref``; ``routable``: addresses of
    not-ready endpoints that count as ready (gated pods); ``leaving``: Nodes whose
    Machine is being deleted, whose ready endpoints are used only when no other
    is ready (taking the last ones out would answer 503 until the drain evicts
    them, while they still serve)."""
    if service is None:
        return ()
    sport = service.find_port(port_ref)
    if sport is None:
        return ()
    ready: set[Peer] = set()
    on_leaving: set[Peer] = set()  # ready, on a Node being drained: the first fallback
    draining: set[Peer] = set()  # serving, terminating: the last fallback
    for s in slices:
        if s.address_type not in ("IPv4", "IPv6"):
            continue
        number = s.ports.get(sport.name)
        if number is None:
            continue
        for e in s.endpoints:
            # A terminating endpoint leaves rotation at once, even one still
            # marked ready (the slices of a publishNotReadyAddresses Service).
            chosen = on_leaving if leaving and e.node_name in leaving else ready
            if e.ready and not e.terminating:
                chosen.update(Peer(a, number) for a in e.addresses)
            elif routable and not e.terminating:
                chosen.update(Peer(a, number) for a in e.addresses if a in routable)
            elif e.serving and e.terminating:
                draining.update(Peer(a, number) for a in e.addresses)
    return tuple(sorted(ready or on_leaving or draining))


# A backend key's suffix (``ns/svc:port@cluster-ip``): the Service's ClusterIP
# and port, not its endpoints (an Ingress's ``nginx.org/use-cluster-ip``). A
# port name is an IANA service name, so "@" never ends a plain key.
CLUSTER_IP = "@cluster-ip"


def cluster_ip_peers(service: Service | None, port_ref: int | str) -> tuple[Peer, ...]:
    """NIC's use-cluster-ip: the one peer ``ClusterIP:<Service port>`` (the
    port the Ingress names, resolved by name among the Service's ports); none
    when the Service or port is missing or the Service has no ClusterIP
    (headless, ExternalName: NIC would write ``None:port``; ferryman answers 503)."""
    if service is None or not service.cluster_ip:
        return ()
    sport = service.find_port(port_ref)
    if sport is None:
        return ()
    return (Peer(service.cluster_ip, sport.port),)


def port_ref_of(text: str) -> int | str:
    """Backend keys carry the port as text; digits mean a port number."""
    return int(text) if text.isascii() and text.isdigit() else text
