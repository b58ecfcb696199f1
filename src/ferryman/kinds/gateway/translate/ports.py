"""Which ports a Gateway's listeners may have (kinds/gateway/translate/gateway.py
asks ``PortRules.unavailable`` of each): one owner per socket, the oldest.

Never ferryman's own ports (readiness, metrics, NGINX status, the webhook,
and the Ingress ports where Gateways share their addresses); never a port
NGINX could not bind; on every address, never a port an older
GlobalConfiguration listener or Ingress ``listen-ports`` holds; and never a
socket an older Gateway holds in NGINX's other block (a TLS passthrough
listener is a stream server, HTTP and HTTPS ones are the http block's).
"""

from __future__ import annotations

from collections.abc import Mapping

from ferryman.engine.configuration import AgeKey
from ferryman.engine.settings import Settings
from ferryman.engine.store import Store
from ferryman.kinds.gateway.parse.gateway_api import Gateway, Listener
from ferryman.kinds.gateway.records.addresses import Outcome
from ferryman.kinds.gateway.records.servers import ANY_ADDRESS
from ferryman.translators.listen_ports import ListenPorts


class PortRules:
    def __init__(self, settings: Settings, store: Store, ports: ListenPorts | None) -> None:
        self._settings = settings
        self._store = store
        self.ports = ports
        self.everywhere: set[tuple[str, str]] = set()  # Gateways on every address
        # The GlobalConfiguration's TCP and HTTP listeners as asked for (port ->
        # name), whatever Gateways took from it since.
        self.gc_ports: dict[int, str] = {}
        self.outcomes: Mapping[tuple[str, str], Outcome] = {}
        self.families: dict[tuple[str, int], tuple[AgeKey, str, str]] = {}

    def update(
        self,
        gateways: list[Gateway],
        outcomes: Mapping[tuple[str, str], Outcome],
        gc_ports: dict[int, str],
    ) -> None:
        """This computation's Gateways, their addresses and the GlobalConfiguration's ports."""
        self.outcomes = outcomes
        self.everywhere = {k for k, o in outcomes.items() if o == ANY_ADDRESS}
        self.gc_ports = gc_ports
        self.families = _families(gateways, outcomes)

    def unavailable(self, g: Gateway, lst: Listener) -> str | None:
        port = lst.port
        own = self._own_port(port) or self._other_block(g, lst)
        if own is not None or self.ports is None:
            return own
        if port in (unbindable := self.ports.unbindable()):
            return f"port {port} {unbindable[port]}"
        if (g.meta.namespace, g.meta.name) not in self.everywhere:
            return None  # on its own address: never an Ingress's or a listener's socket
        if port in self.gc_ports and self._gc_older(g):
            return f"port {port} is GlobalConfiguration listener {self.gc_ports[port]}'s port"
        oldest = self.ports.oldest(port)
        if oldest is not None and oldest[0] < _age_key(g):
            ref = oldest[1]
            return f"port {port} is served for Ingress {ref.namespace}/{ref.name}"
        return None

    def _other_block(self, g: Gateway, lst: Listener) -> str | None:
        """An older Gateway's socket on this port of another kind (a stream
        server passing TLS through or ending it, or the http block's HTTP and
        HTTPS): one socket cannot be two."""
        address = self.outcomes.get((g.meta.namespace, g.meta.name))
        if not isinstance(address, str):
            return None
        mine = _age_key(g)
        for (where, port), (age, holder, who) in self.families.items():
            overlaps = where == address or ANY_ADDRESS in (where, address)
            if port == lst.port and overlaps and holder != _socket_kind(lst) and age < mine:
                return f"port {port} is Gateway {who}'s {holder} socket"
        return None

    def _gc_older(self, g: Gateway) -> bool:
        """The GlobalConfiguration is older than ``g``: its listeners keep their
        ports (else it leaves out those ``g``'s listeners take)."""
        name = self._settings.transport.global_configuration
        obj = self._store.get("GlobalConfiguration", *name) if name else None
        meta = (obj or {}).get("metadata") or {}
        ts = meta.get("creationTimestamp")
        ts = ts if isinstance(ts, str) else None
        age = (ts is None, ts or "", *(name or ("", "")), "GlobalConfiguration")
        return age < _age_key(g)

    def _own_port(self, port: int) -> str | None:
        s = self._settings
        own = {s.listen.ready_port: "readiness", s.listen.metrics_port: "metrics"}
        if s.nginx.status_port:
            own[s.nginx.status_port] = "NGINX status"
        if s.gates.webhook_port:
            own[s.gates.webhook_port] = "readiness gate webhook"
        if not s.gateway.addresses or s.transport.tls_passthrough:
            own[s.listen.https_port] = "Ingress HTTPS"
        if not s.gateway.addresses:
            own[s.listen.http_port] = "Ingress HTTP"
        if port in own:
            return f"port {port} is ferryman's {own[port]} port"
        return None


def _age_key(g: Gateway) -> AgeKey:
    """As Ingresses' (configuration.age_key): who is older decides a port."""
    ts = g.meta.creation_timestamp
    return (ts is None, ts or "", g.meta.namespace, g.meta.name, "Gateway")


def _socket_kind(lst: Listener) -> str:
    if lst.protocol != "TLS":
        return "HTTP"
    return "TLS passthrough" if lst.tls_mode == "Passthrough" else "TLS terminating"


def _families(
    gateways: list[Gateway], outcomes: Mapping[tuple[str, str], Outcome]
) -> dict[tuple[str, int], tuple[AgeKey, str, str]]:
    """Each (address, port) socket's oldest Gateway: its age, the kind of
    socket its listener there asks for (``_socket_kind``), its namespace/name."""
    out: dict[tuple[str, int], tuple[AgeKey, str, str]] = {}
    for g in sorted(gateways, key=_age_key):
        address = outcomes.get((g.meta.namespace, g.meta.name))
        if isinstance(address, str):
            for lst in g.listeners:
                who = f"{g.meta.namespace}/{g.meta.name}"
                out.setdefault((address, lst.port), (_age_key(g), _socket_kind(lst), who))
    return out
