"""The HTTP ports beyond the default two, and the two files that open them.

Two kinds of resource open ports on ferryman's public server: the
GlobalConfiguration's HTTP listeners (transport_servers.py hands them over)
and Ingresses' ``nginx.org/listen-ports``/``listen-ports-ssl``
(configs/ingress_ports.py checks them; the Ingress translator claims them
here). This holds both and writes ``http-listeners.conf`` and
``http-listener-map.conf`` (configs/http_listeners.py) from them, so the
files change only when the set of ports does: that reloads once, and the
controller does it with the rest of the flush.

A port is opened with one scheme: when Ingresses ask for one port with both,
the oldest claimant's (creationTimestamp, namespace, name: as hosts are
owned) wins, and the others are told (``taken``) and re-rendered when that
changes (``claim`` and ``release`` return whose grants changed).
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass

from ferryman.configs.http_listeners import HTTP_LISTENERS_FILE, listener_files
from ferryman.configs.ingress_ports import Claim
from ferryman.configuration import AgeKey
from ferryman.resources.globalconfiguration import Listener
from ferryman.resources.meta import ObjectRef


@dataclass(frozen=True)
class Grant:
    """The ports a claimant is served on, and those an older one holds with
    the other scheme (port -> that Ingress, ``namespace/name``)."""

    plain: frozenset[int] = frozenset()
    ssl: frozenset[int] = frozenset()
    taken: tuple[tuple[int, bool, str], ...] = ()  # (port, asked as TLS, holder)


class ListenPorts:
    def __init__(self, files: MutableMapping[str, str], enabled: bool = True) -> None:
        """``enabled``: nginx.conf includes the files (the nginx data plane;
        Angie's classic configuration serves neither kind)."""
        self._files = files
        self._enabled = enabled
        self._listeners: tuple[Listener, ...] = ()
        self._claims: dict[ObjectRef, tuple[AgeKey, Claim]] = {}
        self._grants: dict[ObjectRef, Grant] = {}

    @property
    def enabled(self) -> bool:
        return self._enabled

    def set_listeners(self, listeners: Iterable[Listener]) -> None:
        """The GlobalConfiguration's listeners (none without one); called only
        with --global-configuration, which always has the files."""
        self._listeners = tuple(listeners)
        self._write(always=True)

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
        scheme = self._schemes()
        grants: dict[ObjectRef, Grant] = {}
        for ref, (_, claim) in self._claims.items():
            asked = [(p, False) for p in claim.plain] + [(p, True) for p in claim.ssl]
            taken = []
            for port, ssl in asked:
                held, by = scheme[port]
                if held != ssl:
                    taken.append((port, ssl, f"{by.namespace}/{by.name}"))
            refused = {p for p, _, _ in taken}
            grants[ref] = Grant(
                frozenset(claim.plain - refused),
                frozenset(claim.ssl - refused),
                tuple(sorted(taken)),
            )
        old = self._grants
        self._grants = grants
        self._write()
        return {r for r in grants.keys() | old.keys() if grants.get(r) != old.get(r)}

    def _schemes(self) -> dict[int, tuple[bool, ObjectRef]]:
        """Each port's scheme (TLS or not) and the oldest claimant that set it."""
        scheme: dict[int, tuple[bool, ObjectRef]] = {}
        for ref, (_, claim) in sorted(self._claims.items(), key=lambda i: (i[1][0], i[0])):
            for port in sorted(claim.plain):
                scheme.setdefault(port, (False, ref))
            for port in sorted(claim.ssl):
                scheme.setdefault(port, (True, ref))
        return scheme

    def _write(self, always: bool = False) -> None:
        """The files, once there is something to list (or they exist): nginx.conf
        includes them by a glob that matches nothing without them, so a data
        plane without extra ports does not reload for them."""
        if not self._enabled:
            return
        ports = {port: ssl for port, (ssl, _) in self._schemes().items()}
        if always or ports or HTTP_LISTENERS_FILE in self._files:
            self._files.update(listener_files(self._listeners, ports))
