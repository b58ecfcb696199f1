"""GlobalConfiguration and TransportServers (kinds/transport/translate/servers.py) as a
translator: the worker hands it their keys, and a TLS passthrough
TransportServer's host takes part in the host ownership Ingresses and
VirtualServers share (``renders``: rendered again when it wins or loses one)."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping

from ferryman.engine.reads import Reads
from ferryman.engine.secrets import SecretStore
from ferryman.engine.settings import Settings
from ferryman.engine.store import Store
from ferryman.kinds.transport.parse.transportserver import TransportServer
from ferryman.kinds.transport.translate.servers import KINDS, TransportServers
from ferryman.observability.metrics import Metrics
from ferryman.report import NORMAL, VALID, WARNING
from ferryman.resources.meta import ObjectRef
from ferryman.translators import Translator
from ferryman.translators.context import Context
from ferryman.translators.desired import Desired
from ferryman.translators.listen_ports import ListenPorts
from ferryman.translators.renders import Renders
from ferryman.wire.records import Record

# The records a TransportServer holds (kinds/transport/translate/servers.py): S, its stream
# routing, and T, its TLS certificate.
RECORDS = (Record.STREAM, Record.STREAM_CERTIFICATE)


class TransportTranslator(Translator):
    kinds: tuple[str, ...] = tuple(sorted(KINDS))
    renders: tuple[str, ...] = ("TransportServer",)
    rejected_state: str | None = None  # reject_itself() reports it
    records: tuple[str, ...] = RECORDS

    def __init__(
        self,
        settings: Settings,
        store: Store,
        files: MutableMapping[str, str],
        desired: Desired,
        renders: Renders,
        secrets: SecretStore,
        stream: bool,
        tls_socket: str,
        http_listeners: bool = False,
        listen_ports: ListenPorts | None = None,
    ) -> None:
        self._d = desired
        self._renders = renders
        self._secrets = secrets
        self.servers = TransportServers(
            settings, store, files, stream=stream,
            served_class=lambda: desired.policy.served, state=self._state,
            event=desired.event, set_backends=desired.endpoints.set_backends,
            owner=desired.config.owner, claim=self._claim, https_socket=tls_socket,
            read_secret=self._secret, http_listeners=http_listeners,
            set_http_listeners=listen_ports.set_listeners if listen_ports else None,
            class_checked=desired.class_checked, write_streams=desired.write_streams,
            write_records=desired.write_records,
        )  # fmt: skip
        if listen_ports is not None:
            listen_ports.gateway_ports_observers.append(self.servers.set_gateway_ports)

    def _state(self, ref: ObjectRef, state: str, reason: str, message: str) -> None:
        self._d.event(ref, NORMAL if state == VALID else WARNING, reason, message, state)

    def _secret(self, ref: ObjectRef, name: str | None) -> tuple[str | None, str]:
        """A TransportServer's TLS Secret as a certificate record (or why not); its
        change translates the TransportServer again, as an Ingress's does."""
        reads = Reads(self._d.cache)
        state = reads.secret(ref.namespace, name) if name else None
        self._d.declare(ref, reads.refs)
        if state is None or state.cert_id is None:
            return None, (state.error if state else None) or "not found"
        return self._secrets.record(state.cert_id), ""

    def _claim(self, ref: ObjectRef, ts: TransportServer | None) -> None:
        """A TLS passthrough host joins (or leaves) the shared host ownership."""
        config = self._d.config
        self._renders.render_all(config.upsert(ts) if ts else config.delete(ref))

    def sync(self, ref: ObjectRef) -> None:
        self.servers.sync(ref)
        if ref.kind == "GlobalConfiguration":
            # VirtualServers on its HTTP listeners read it (Reads.global_configuration).
            self._d.referenced_changed(ref)

    def render(self, ref: ObjectRef) -> None:
        self.servers.host_owners_changed()

    def reject_itself(self, ref: ObjectRef, reason: str) -> bool:
        """Rendering it failed: rejected until it changes (a TransportServer is
        not a host owner unless it passes TLS through: its own status says so)."""
        self.servers.refuse(ref, reason)
        return True

    def refuse_ports(self, ports: Mapping[int, str]) -> bool:
        """The GlobalConfiguration's listeners asking for ``ports`` are left out."""
        return self.servers.block(ports)

    def holder(self, kind: str, name: str) -> ObjectRef | None:
        """Who wrote the record: a TransportServer, or an Ingress passing its host
        through (Desired.stream_writer_of)."""
        return self.servers.holder(name) or self._d.stream_writer_of(name)

    def refuse_record(self, kind: str, name: str, why: str) -> None:
        """NGINX refused its record: rejected until it changes."""
        if (holder := self.servers.holder(name)) is not None:
            self.servers.refuse(holder, f"the stream record {kind}:{name} {why}")
        elif (writer := self._d.stream_writer_of(name)) is not None:
            self._renders.reject(writer, f"the stream record {kind}:{name} {why}")

    def withdraw(self, ref: ObjectRef) -> None:
        pass

    def reported(self, ref: ObjectRef, reason: str, message: str) -> None:
        pass

    def waiting(self, refs: set[ObjectRef]) -> set[ObjectRef]:
        return set()

    def gauges(self, metrics: Metrics) -> None:
        for kind, count in self.servers.counts().items():
            metrics.transportserver_resources.labels(type=kind).set(count)


def build(context: Context) -> TransportTranslator:
    c = context
    return TransportTranslator(
        c.settings, c.store, c.files, c.desired, c.renders, c.secrets, c.shape.stream,
        c.shape.tls_socket, http_listeners=True, listen_ports=c.ports,
    )  # fmt: skip
