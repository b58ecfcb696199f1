"""NIC's GlobalConfiguration (k8s.nginx.org/v1): the TCP/UDP listeners TransportServers use.

Shared vocabulary rather than the transport kind's own parser: VirtualServers
(their HTTP listeners), Ingresses (the ports it holds) and Gateways read it too.

One object, named by ``--global-configuration namespace/name``. NIC validates it
listener by listener: an invalid listener, a second one with a name already
taken, or one whose ip:port/protocol collides with an earlier one is left out
and reported (an AddedOrUpdatedWithError Event), and every other listener
stays in force (NIC's ``getValidListeners``). The messages are NIC's.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ferryman.resources import nic_rules as rules
from ferryman.resources.nic_fields import (
    Context,
    Obj,
    Parsed,
    Problem,
    duplicate,
    forbidden,
    invalid,
    parse_object_meta,
    required,
)

SPEC_KEYS = frozenset({"listeners"})
LISTENER_KEYS = frozenset({"name", "port", "protocol", "ssl", "ipv4", "ipv6"})
PROTOCOLS = ("HTTP", "TCP", "UDP")
# NIC's built-in listener on the HTTPS port (--enable-tls-passthrough).
TLS_PASSTHROUGH = "tls-passthrough"
TLS_PASSTHROUGH_PROTOCOL = "TLS_PASSTHROUGH"


@dataclass(frozen=True)
class Listener:
    name: str
    port: int
    protocol: str  # HTTP, TCP or UDP
    ssl: bool = False
    ipv4: str = ""  # "": every IPv4 address
    ipv6: str = ""  # "": every IPv6 address


@dataclass(frozen=True)
class GlobalConfiguration:
    namespace: str
    name: str
    listeners: tuple[Listener, ...]
    # Listeners left out, as NIC reports them (empty: every listener is valid).
    problems: tuple[Problem, ...] = ()

    def listener(self, name: str, protocol: str) -> Listener | None:
        """The listener a TransportServer's ``listener`` names (name and protocol)."""
        for listener in self.listeners:
            if listener.name == name and listener.protocol == protocol:
                return listener
        return None

    def message(self) -> str:
        """The problems as Kubernetes' aggregate error prints them."""
        return Parsed(None, self.problems).message()


def parse_global_configuration(
    obj: Mapping[str, Any],
    context: Context | None = None,
    forbidden_ports: frozenset[int] = frozenset(),
    held: Mapping[int, str] | None = None,
    unbindable: Mapping[int, str] | None = None,
) -> Parsed[GlobalConfiguration]:
    """The valid listeners and the problems of the others; ``forbidden_ports``
    are ferryman's own (NIC forbids its HTTP/HTTPS and status ports);
    ``held``: ports older resources hold (port -> who, said in the problem:
    one owner per port), refused to TCP and HTTP listeners; ``unbindable``:
    ports NGINX could not bind (port -> why), refused to every listener.

    Parsed.resource is None only when the object itself is unusable (no
    metadata, a spec that is not an object)."""
    ctx = context or Context()
    meta = parse_object_meta(obj, ctx)
    spec = Obj.root(ctx, obj.get("spec") or {}, "spec", SPEC_KEYS)
    if meta is None or spec is None:
        return Parsed(None, tuple(ctx.problems))
    listeners: list[Listener] = []
    names: set[str] = set()
    # (address, port) -> protocols, per address family: NIC's conflict check.
    taken: dict[tuple[str, int], list[str]] = {}
    for i, item in enumerate(spec.objs("listeners", LISTENER_KEYS)):
        before = len(ctx.problems)
        listener = _listener(item, forbidden_ports)
        if listener is None or len(ctx.problems) > before:
            continue
        refused = dict(held or {}) if listener.protocol != "UDP" else {}
        refused.update(unbindable or {})
        if listener.port in refused:
            why = f"Listener {listener.name}: port {listener.port} {refused[listener.port]}"
            ctx.add(forbidden(f"spec.listeners[{i}].port", why))
            continue
        if listener.name in names:
            ctx.add(duplicate(f"spec.listeners[{i}].name", listener.name))
            continue
        names.add(listener.name)
        clash = None
        for family in _addresses(listener):
            clash = _clash(taken, family, listener)
            taken.setdefault((family, listener.port), []).append(listener.protocol)
            if clash is not None:
                break  # NIC records the clashing family only
        if clash is not None:
            ctx.add(clash)
            continue
        listeners.append(listener)
    gc = GlobalConfiguration(meta.namespace, meta.name, tuple(listeners), tuple(ctx.problems))
    return Parsed(gc, tuple(ctx.problems))


def _addresses(listener: Listener) -> tuple[str, str]:
    return (listener.ipv4 or "0.0.0.0", listener.ipv6 or "::")


def _clash(
    taken: dict[tuple[str, int], list[str]], address: str, listener: Listener
) -> Problem | None:
    """NIC's checkIPPortProtocolConflicts: TCP and HTTP share a port's stream
    socket, UDP has its own."""
    tcp_like = ("HTTP", "TCP")
    for existing in taken.get((address, listener.port), ()):
        if (listener.protocol in tcp_like and existing in tcp_like) or (
            listener.protocol == "UDP" and existing == "UDP"
        ):
            return invalid(
                "spec.listeners.protocol",
                listener.protocol,
                f"Listener {listener.name}: Duplicated ip:port protocol combination "
                f"{address}:{listener.port} {listener.protocol}",
            )
    return None


def _listener(o: Obj, forbidden_ports: frozenset[int]) -> Listener | None:
    ctx = o.ctx
    name = o.text("name")
    if name == TLS_PASSTHROUGH:
        ctx.add(forbidden(o.at("name"), "is the name of a built-in listener"))
    else:
        ctx.extend(listener_name_problems(o.at("name"), name))
    port = o.integer("port") or 0
    if port in forbidden_ports:
        ctx.add(forbidden(o.at("port"), f"Listener {name}: port {port} is forbidden"))
    else:
        ctx.extend([invalid(o.at("port"), port, m) for m in rules.port(port)])
    protocol = o.text("protocol")
    ctx.extend(protocol_problems(o.at("protocol"), protocol))
    ipv4, ipv6 = o.text("ipv4"), o.text("ipv6")
    if ipv4 and not _is_ip(ipv4, 4):
        ctx.add(invalid(o.at("ipv4"), ipv4, "must be a valid IPv4 address"))
    if ipv6 and not _is_ip(ipv6, 6):
        ctx.add(invalid(o.at("ipv6"), ipv6, "must be a valid IPv6 address"))
    ssl = bool(o.boolean("ssl"))
    return Listener(name, port, protocol, ssl, ipv4, ipv6)


def listener_name_problems(where: str, name: str) -> list[Problem]:
    """NIC's validateListenerName: a DNS-1035 label."""
    if not name:
        return [required(where)]
    return [invalid(where, name, m) for m in rules.dns1035_label(name)]


def protocol_problems(where: str, protocol: str) -> list[Problem]:
    if protocol in PROTOCOLS:
        return []
    accepted = ",".join(PROTOCOLS)
    return [invalid(where, protocol, f"must specify a valid protocol. Accepted values: {accepted}")]


def _is_ip(text: str, version: int) -> bool:
    """An address of that version, without an IPv6 zone: Python accepts any text
    after "%" (";}" included), NIC's ParseIPSloppy none, and it reaches ``listen``."""
    if "%" in text:
        return False
    try:
        return ipaddress.ip_address(text).version == version
    except ValueError:
        return False
