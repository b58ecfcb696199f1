"""The HTTP ports beyond the default two, and the two files that open them.

Two kinds of resource open ports on ferryman's public server: the
GlobalConfiguration's HTTP listeners (kinds/transport/translate/servers.py hands them over)
and Ingresses' ``nginx.org/listen-ports``/``listen-ports-ssl``
(kinds/ingress/records/ports.py checks them; the Ingress translator claims them
here). This holds both and writes ``http-listeners.conf`` and
``http-listener-map.conf`` (configs/http_listeners.py) from them, so the
files change only when the set of ports does: that reloads once, and the
controller does it with the rest of the flush.

A port is opened with one scheme: when Ingresses ask for one port with both,
the oldest claimant's (creationTimestamp, namespace, name: as hosts are
owned) wins, and the others are told (``taken``) and re-rendered when that
changes (``claim`` and ``release`` return whose grants changed).

A port has one owner across kinds too. A Gateway listening on every address
(no --gateway-addresses) that is older than every Ingress asking for one of
its listeners' ports keeps it (kinds/gateway/translate/gateway.py asks ``oldest`` and
hands over what it keeps, ``set_gateway_ports``); the Ingresses are refused
it. A port NGINX could not bind (another process holds it: the failed
reload names it, ``unbindable``) is refused to every Ingress asking for it
until none does, so the reload goes on without it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass

from ferryman.configs.http_listeners import HTTP_LISTENERS_FILE, Claim, listener_files
from ferryman.engine.configuration import AgeKey
from ferryman.resources.global_configuration import Listener
from ferryman.resources.meta import ObjectRef


@dataclass(frozen=True)
class Grant:
    """The ports a claimant is served on, and those an older one holds with
    the other scheme (port -> that Ingress, ``namespace/name``)."""

    plain: frozenset[int] = frozenset()
    ssl: frozenset[int] = frozenset()
    taken: tuple[tuple[int, bool, str], ...] = ()  # (port, asked as TLS, holder)
    # Ports refused to every Ingress: (port, asked as TLS, why).
    refused: tuple[tuple[int, bool, str], ...] = ()


class ListenPorts:
    def __init__(self, files: MutableMapping[str, str], *, ipv6: bool = True) -> None:
        """``ipv6``: the ports listen on IPv6 too (not --disable-ipv6)."""
        self._files = files
        self._ipv6 = ipv6
        self._listeners: tuple[Listener, ...] = ()
        self._claims: dict[ObjectRef, tuple[AgeKey, Claim]] = {}
        self._grants: dict[ObjectRef, Grant] = {}
        # Ports refused to every Ingress (port -> why, said in the warning):
        # those NGINX could not bind, and those older Gateways keep.
        self._unbindable: dict[int, str] = {}
        self._gateway_ports: dict[int, str] = {}
        self._gateway_asks: frozenset[int] = frozenset()
        self._holders: dict[int, tuple[AgeKey, ObjectRef]] = {}
        # Called when the oldest Ingress asking for some port changed (the
        # Gateway translator decides its listeners by it).
        self.on_owners_changed: Callable[[], None] = lambda: None
        # Told the ports Gateways keep, once decided (a younger
        # GlobalConfiguration's listeners give way to them).
        self.gateway_ports_observers: list[Callable[[Mapping[int, str]], None]] = []

    def set_listeners(self, listeners: Iterable[Listener]) -> None:
        """The GlobalConfiguration's listeners (none without one); called only
        with --global-configuration, which always has the files."""
        self._listeners = tuple(listeners)
        self._write(always=True)

    def oldest(self, port: int) -> tuple[AgeKey, ObjectRef] | None:
        """The oldest Ingress asking for ``port`` (whatever it is granted)."""
        return self._holders.get(port)

    def unbindable(self) -> Mapping[int, str]:
        return self._unbindable

    def set_gateway_ports(self, held: Mapping[int, str], asked: Iterable[int]) -> set[ObjectRef]:
        """The ports Gateways keep (port -> what holds it) and every port their
        listeners ask for; returns the Ingresses whose grants changed."""
        self._gateway_asks = frozenset(asked)
        if dict(held) == self._gateway_ports and not self._lift():
            return set()
        self._gateway_ports = dict(held)
        return self._decide()

    def tell_gateway_ports(self, held: Mapping[int, str]) -> None:
        """Tell the observers the ports Gateways keep (after the Ingresses that
        lost them were rendered again)."""
        for observer in self.gateway_ports_observers:
            observer(held)

    def block(self, ports: Mapping[int, str]) -> tuple[set[ObjectRef], set[int]]:
        """NGINX could not bind ``ports`` (port -> its reason): refused from now
        on. Returns the Ingresses whose grants changed, and the ports some
        Ingress or Gateway asked for (those a reload can go on without)."""
        asked = {p for p in ports if p in self._holders or p in self._gateway_asks}
        for port in asked:
            self._unbindable[port] = f"cannot be bound: {ports[port]}"
        return (self._decide() if asked else set()), asked

    def _lift(self) -> bool:
        """A port nobody asks for any more is tried again when next asked."""
        gone = [
            p for p in self._unbindable if p not in self._holders and p not in self._gateway_asks
        ]
        for port in gone:
            del self._unbindable[port]
        return bool(gone)

    def grant(self, ref: ObjectRef) -> Grant:
        return self._grants.get(ref, Grant())

    def claim(self, ref: ObjectRef, age: AgeKey, claim: Claim) -> set[ObjectRef]:
        """``ref`` asks for ``claim``'s ports; returns the other claimants whose
        grants changed (to be rendered again). Its own is ``grant(ref)``."""
        if claim.plain or claim.ssl:
            self._claims[ref] = (age, claim)
        else:
            self._claims.pop(ref, None)
        return self._decide() - {ref}

    def release(self, ref: ObjectRef) -> set[ObjectRef]:
        """``ref`` asks for no port any more (deleted, rejected, not served)."""
        if self._claims.pop(ref, None) is None:
            return set()
        return self._decide() - {ref}

    def _decide(self) -> set[ObjectRef]:
        holders = self._oldest()
        if holders != self._holders:
            self._holders = holders
            self._lift()
            self.on_owners_changed()
        scheme = self._schemes()
        blocked = {**self._gateway_ports, **self._unbindable}
        grants: dict[ObjectRef, Grant] = {}
        for ref, (_, claim) in self._claims.items():
            asked = [(p, False) for p in claim.plain] + [(p, True) for p in claim.ssl]
            taken = []
            refused: list[tuple[int, bool, str]] = []
            for port, ssl in asked:
                if port in blocked:
                    refused.append((port, ssl, blocked[port]))
                    continue
                held, by = scheme[port]
                if held != ssl:
                    taken.append((port, ssl, f"{by.namespace}/{by.name}"))
            out = {p for p, _, _ in taken} | {p for p, _, _ in refused}
            grants[ref] = Grant(
                frozenset(claim.plain - out),
                frozenset(claim.ssl - out),
                tuple(sorted(taken)),
                tuple(sorted(refused)),
            )
        old = self._grants
        self._grants = grants
        self._write()
        return {r for r in grants.keys() | old.keys() if grants.get(r) != old.get(r)}

    def _oldest(self) -> dict[int, tuple[AgeKey, ObjectRef]]:
        out: dict[int, tuple[AgeKey, ObjectRef]] = {}
        for ref, (age, claim) in sorted(self._claims.items(), key=lambda i: (i[1][0], i[0])):
            for port in claim.plain | claim.ssl:
                out.setdefault(port, (age, ref))
        return out

    def _schemes(self) -> dict[int, tuple[bool, ObjectRef]]:
        """Each open port's scheme (TLS or not) and the oldest claimant that set
        it (the ports refused to every Ingress left out)."""
        scheme: dict[int, tuple[bool, ObjectRef]] = {}
        blocked = self._gateway_ports.keys() | self._unbindable.keys()
        for ref, (_, claim) in sorted(self._claims.items(), key=lambda i: (i[1][0], i[0])):
            for port in sorted(claim.plain - blocked):
                scheme.setdefault(port, (False, ref))
            for port in sorted(claim.ssl - blocked):
                scheme.setdefault(port, (True, ref))
        return scheme

    def _write(self, always: bool = False) -> None:
        """The files, once there is something to list (or they exist): nginx.conf
        includes them by a glob that matches nothing without them, so a data
        plane without extra ports does not reload for them."""
        ports = {port: ssl for port, (ssl, _) in self._schemes().items()}
        if always or ports or HTTP_LISTENERS_FILE in self._files:
            self._files.update(listener_files(self._listeners, ports, ipv6=self._ipv6))
