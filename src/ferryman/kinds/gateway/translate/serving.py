"""What ferryman's Gateways serve, once attached: each Gateway's status (with
its address or why it has none), the listeners its address programs (HTTP and
HTTPS into W records, TLS into stream servers), the sockets NGINX listens on,
and the ports Gateways on every address keep from the Ingresses' listeners.

Pure: the translator (gateway.py) reads the store and writes Desired; this
module only decides, from the parsed Gateways, their address outcomes and the
attachment, so the per-Gateway walk is testable and the translator stays its
imperative shell.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ferryman.configs.model import BackendKey, backend_key
from ferryman.kinds.gateway.parse.gateway_api import Gateway, Listener
from ferryman.kinds.gateway.records.addresses import NoAddress, Outcome
from ferryman.kinds.gateway.records.attach import Attachment, route_kind
from ferryman.kinds.gateway.records.passthrough import PassthroughServed
from ferryman.kinds.gateway.records.servers import ANY_ADDRESS, Served
from ferryman.kinds.gateway.records.status import address_entry, gateway_status, without_address
from ferryman.resources.meta import ObjectRef
from ferryman.resources.secret import TLSPair


@dataclass
class Serving:
    statuses: dict[ObjectRef, Mapping[str, Any]] = field(default_factory=dict)
    # Ports a Gateway on every address keeps: port -> why (the Ingresses'
    # listen-ports and the GlobalConfiguration are told); every port asked.
    held: dict[int, str] = field(default_factory=dict)
    asked: set[int] = field(default_factory=set)
    served: list[Served] = field(default_factory=list)  # HTTP and HTTPS listeners
    sockets: set[tuple[str, int, bool]] = field(default_factory=set)  # (address, port, TLS)
    passing: list[PassthroughServed] = field(default_factory=list)  # TLS listeners


def serving(
    gateways: Sequence[Gateway],
    outcomes: Mapping[tuple[str, str], Outcome],
    att: Attachment,
    status_addresses: Sequence[str],
    cert_id: Callable[[str, str], str | None],
    client: Callable[[tuple[str, str], Listener], str | None] = lambda gw, lst: None,
    tls_pair: Callable[[str, str], TLSPair | str] = lambda namespace, name: "not read",
) -> Serving:
    """``status_addresses``: what a Gateway on every address shows as its
    addresses (the Ingresses' status addresses); ``cert_id(namespace, name)``:
    the certificate id of a Secret (None: unusable); ``client(gateway,
    listener)``: the K record of an HTTPS listener's client certificate
    validation (records/frontend_tls.py; None: none); ``tls_pair(namespace,
    name)``: a Secret's pair, for a TLS listener ending TLS (or why it is
    unusable: the listener's ResolvedRefs already says so)."""
    out = Serving()
    for g in gateways:
        key = (g.meta.namespace, g.meta.name)
        outcome = outcomes[key]
        address = outcome if isinstance(outcome, str) else None
        status = att.gateways[key]
        shown = address if address != ANY_ADDRESS else None
        body = gateway_status(status, g.meta.generation, shown)
        if isinstance(outcome, NoAddress):
            body = without_address(body, outcome, g.meta.generation)
        elif address == ANY_ADDRESS and status_addresses:
            body["addresses"] = [address_entry(a) for a in status_addresses]
        out.statuses[ObjectRef("Gateway", *key)] = body
        if address is None:
            continue
        usable = {s.name for s in status.listeners if _programmed(s.conditions)}
        for lst in g.listeners:
            out.asked.add(lst.port)
            if lst.name not in usable:
                continue
            if address == ANY_ADDRESS:
                who = f"{g.meta.namespace}/{g.meta.name}'s listener {lst.name}"
                out.held.setdefault(lst.port, f"is Gateway {who}'s port")
            if lst.protocol == "TLS":
                passes = att.passthrough.get((*key, lst.name), {})
                pair = None
                if lst.tls_mode == "Terminate" and lst.certificates:
                    cref = lst.certificates[0]
                    read = tls_pair(cref.namespace or g.meta.namespace, cref.name)
                    pair = None if isinstance(read, str) else read
                out.passing.append(PassthroughServed(address, lst, passes, pair))
                continue
            cert = None
            if lst.protocol == "HTTPS" and lst.certificates:
                cref = lst.certificates[0]
                cert = cert_id(cref.namespace or g.meta.namespace, cref.name)
            table = att.table.get((*key, lst.name), {})
            out.served.append(Served(address, lst, table, cert, client(key, lst)))
            out.sockets.add((address, lst.port, lst.protocol == "HTTPS"))
    return out


def _programmed(conditions: Iterable[Any]) -> bool:
    return any(c.type == "Programmed" and c.status for c in conditions)


def backends_used(
    served: Iterable[Served], passing_uses: Mapping[str, frozenset[BackendKey]]
) -> dict[ObjectRef, set[BackendKey]]:
    """Each route's backends (mirrors included) on the served listeners; the
    TLSRoutes' from ``passing_uses`` (namespace/name -> keys)."""
    uses: dict[ObjectRef, set[BackendKey]] = {}
    for s in served:
        for entries in s.table.values():
            for e in entries:
                keys = uses.setdefault(ObjectRef(*route_kind(e.route)), set())
                for ns, service, port, _ in e.backends:
                    if service is not None:
                        keys.add(backend_key(ns, service, str(port)))
                for ns, service, port, _ in e.mirrors:
                    keys.add(backend_key(ns, service, str(port)))
    for route, used in passing_uses.items():
        uses[ObjectRef("TLSRoute", *route.split("/", 1))] = set(used)
    return uses
