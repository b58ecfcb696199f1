"""TransportServers on GlobalConfiguration listeners: ownership, records, stream.conf, Events.

The controller hands this module every GlobalConfiguration and TransportServer
key (``sync``). There are few of them, so each change recomputes the whole
state, as NIC's ``buildListenerHostsAndTSConfigurations`` does:

- the GlobalConfiguration named by ``--global-configuration`` gives the
  listeners (its invalid ones are left out and reported on it);
- a TransportServer takes the listener it names (name and protocol); one
  TransportServer per (listener, host), the oldest wins (creationTimestamp,
  then namespace/name); the others are Rejected with NIC's messages;
- TLS passthrough TransportServers (``--enable-tls-passthrough``) take their
  host on the built-in ``tls-passthrough`` listener; ``claims`` hands those
  hosts to the host ownership shared with Ingresses and VirtualServers.

Each holder gets an ``S`` record (kinds/transport/records/stream.py) and its backends'
endpoint sets; ``stream.conf`` gets a server per listener. Records change
without a reload; stream.conf changes reload (the controller applies files).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass

from ferryman.configs.http_listeners import listener_files
from ferryman.configs.model import BackendKey
from ferryman.engine.configuration import age_key
from ferryman.engine.reads import forbidden_ports
from ferryman.engine.settings import Settings
from ferryman.engine.store import Store
from ferryman.kinds.transport.parse.transportserver import TransportServer, parse_transport_server
from ferryman.kinds.transport.records.stream import (
    CERTIFICATE_RECORD,
    STREAM_FILE,
    Passthrough,
    StreamServer,
    backends,
    certificate_record,
    record_name,
    render_stream,
    stream_record,
    stream_server,
)
from ferryman.report import (
    ADDED_OR_UPDATED,
    ADDED_OR_UPDATED_WITH_ERROR,
    ADDED_OR_UPDATED_WITH_WARNING,
    INVALID,
    NORMAL,
    REJECTED,
    VALID,
    WARNING,
    WARNING_STATE,
)
from ferryman.resources.global_configuration import (
    GlobalConfiguration,
    Listener,
    parse_global_configuration,
)
from ferryman.resources.meta import ObjectRef

KINDS = frozenset({"GlobalConfiguration", "TransportServer"})
# NIC's Event reason for a GlobalConfiguration taken as it is.
UPDATED = "Updated"

# (ref, state, reason, message): a TransportServer's Event and status.
StateSink = Callable[[ObjectRef, str, str, str], None]
# (ref, type, reason, message): an Event only (the GlobalConfiguration's).
EventSink = Callable[[ObjectRef, str, str, str], None]
BackendsSink = Callable[[ObjectRef, frozenset[BackendKey]], None]
# (writer, S record name -> value): what that writer's S records are now.
StreamsSink = Callable[[ObjectRef, Mapping[str, str]], None]
# (record kind, name -> value): every record of that kind.
RecordsSink = Callable[[str, Mapping[str, str]], None]
# (reader, Secret name or None) -> (its certificate record, or None and why): the
# controller reads it (and records the dependency; None: reads none).
SecretReader = Callable[[ObjectRef, str | None], tuple[str | None, str]]


@dataclass(frozen=True)
class Outcome:
    state: str
    reason: str
    message: str


class TransportServers:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        files: MutableMapping[str, str],
        *,
        stream: bool,
        served_class: Callable[[], str],
        state: StateSink,
        event: EventSink,
        set_backends: BackendsSink,
        owner: Callable[[str], ObjectRef | None] = lambda host: None,
        claim: Callable[[ObjectRef, TransportServer | None], None] = lambda ref, ts: None,
        read_secret: SecretReader = lambda ref, name: (None, "not found"),
        https_socket: str = "",
        http_listeners: bool = False,
        set_http_listeners: Callable[[Iterable[Listener]], None] | None = None,
        class_checked: Callable[[ObjectRef, str, bool], None] = lambda ref, c, served: None,
        write_streams: StreamsSink = lambda ref, streams: None,
        write_records: RecordsSink = lambda kind, records: None,
    ) -> None:
        """``stream``: nginx.conf has the stream block (the stream module is
        loaded); without it every TransportServer is refused, saying why.
        ``http_listeners``: nginx.conf's public server takes the HTTP listeners
        (configs/http_listeners.py),
        handed to ``set_http_listeners`` (translators/listen_ports.py, which adds
        the Ingresses' ports; None: this writes the files itself).
        ``write_streams``: a TransportServer's S records (Desired.write_streams:
        shared with the other kinds that write them, an Ingress passing a host
        through, so each drops only its own); ``write_records``: every T record."""
        self._settings = settings
        self._store = store
        self._files = files
        self._stream = stream
        self._served_class = served_class
        self._class_checked = class_checked  # Desired.class_checked: says who is ignored
        self._state = state
        self._event = event
        self._set_backends = set_backends
        self._https_socket = https_socket
        self._owner = owner
        self._claim = claim
        self._read_secret = read_secret
        self._rendering = False
        self._gc: GlobalConfiguration | None = None
        # Ports older Gateway listeners on every address keep (port -> who):
        # the GlobalConfiguration's TCP/HTTP listeners there are left out.
        self._gateway_ports: dict[int, str] = {}
        # Ports NGINX could not bind (port -> why): left out until it changes.
        self._unbindable: dict[int, str] = {}
        self._servers: dict[ObjectRef, TransportServer] = {}
        self._invalid: dict[ObjectRef, str] = {}  # ref -> NIC's message
        self._reported: dict[ObjectRef, Outcome] = {}
        self._holders: set[ObjectRef] = set()
        self._record_writers: dict[str, ObjectRef] = {}
        self._write_streams = write_streams
        self._write_records = write_records
        self._certificates: dict[str, str] = {}  # T records: listener -> certificate
        # Only with --global-configuration: nginx.conf includes the files then.
        self._http_listeners = (
            http_listeners and settings.transport.global_configuration is not None
        )
        self._set_http_listeners = set_http_listeners or (
            lambda listeners: files.update(
                listener_files(listeners, ipv6=not settings.listen.disable_ipv6)
            )
        )
        if self._http_listeners:
            self._set_http_listeners(())
        if stream:
            files[STREAM_FILE] = render_stream(
                [], self._passthrough(), ipv6=not settings.listen.disable_ipv6
            )

    def _passthrough(self) -> Passthrough | None:
        if not self._settings.transport.tls_passthrough or not self._https_socket:
            return None
        return Passthrough(self._settings.listen.https_port, self._https_socket)

    # ---- sync ----------------------------------------------------------------------

    def sync(self, ref: ObjectRef) -> None:
        if ref.kind == "GlobalConfiguration":
            self._unbindable = {}  # changed: every listener is tried again
            self._sync_global_configuration(ref)
            self._recompute(changed={ref})
            return
        was = self._servers.get(ref)
        self._sync_transport_server(ref)
        now = self._servers.get(ref)
        if (was is not None and was.passthrough) or (now is not None and now.passthrough):
            # The host's owner is elected with Ingresses and VirtualServers; the
            # controller calls host_owners_changed for every claimant affected.
            self._rendering = True
            try:
                self._claim(ref, now if now is not None and now.passthrough else None)
            finally:
                self._rendering = False
        self._recompute(changed={ref})

    def holder(self, record: str) -> ObjectRef | None:
        """The TransportServer that wrote S record ``record``."""
        return self._record_writers.get(record)

    def refuse(self, ref: ObjectRef, why: str) -> None:
        """NGINX refused its record: rejected until it changes (as an Ingress is)."""
        ts = self._servers.pop(ref, None)
        if ts is None:
            return
        who = f"{ref.namespace}/{ref.name}"
        self._invalid[ref] = f"TransportServer {who} was rejected with error: {why}"
        if ts.passthrough:
            self._rendering = True
            try:
                self._claim(ref, None)
            finally:
                self._rendering = False
        self._recompute(changed={ref})

    def counts(self) -> dict[str, int]:
        """Served TransportServers by NIC's metric type."""
        out = dict.fromkeys(("passthrough", "tcp", "udp"), 0)
        for ref in self._holders:
            ts = self._servers.get(ref)
            if ts is not None:
                kind = "passthrough" if ts.passthrough else ts.protocol.lower()
                out[kind] = out.get(kind, 0) + 1
        return out

    def host_owners_changed(self) -> None:
        """A passthrough host changed hands (the controller's render of a claimant)."""
        if not self._rendering:
            self._recompute(changed=set())

    def set_gateway_ports(self, held: Mapping[int, str]) -> None:
        """The ports Gateways keep (kinds/gateway/translate/gateway.py decided by age)."""
        if dict(held) == self._gateway_ports:
            return
        self._gateway_ports = dict(held)
        self._parse_again()

    def block(self, ports: Mapping[int, str]) -> bool:
        """NGINX could not bind ``ports`` (port -> its reason): the listeners
        asking for them are left out (reported as the object's other problems)
        until it changes. True when some listener was."""
        mine = (
            {p for p in ports if any(lst.port == p for lst in self._gc.listeners)}
            if (self._gc is not None)
            else set()
        )
        if not mine:
            return False
        self._unbindable.update({p: f"cannot be bound: {ports[p]}" for p in mine})
        self._parse_again()
        return True

    def _parse_again(self) -> None:
        if (name := self._settings.transport.global_configuration) is not None:
            ref = ObjectRef("GlobalConfiguration", *name)
            self._sync_global_configuration(ref)
            self._recompute(changed={ref})

    def _sync_global_configuration(self, ref: ObjectRef) -> None:
        if self._settings.transport.global_configuration != (ref.namespace, ref.name):
            return  # NIC watches the one it is told about, by name
        obj = self._store.get("GlobalConfiguration", ref.namespace, ref.name)
        if obj is None:
            self._gc = None
            if self._http_listeners:
                self._set_http_listeners(())
            return
        parsed = parse_global_configuration(
            obj,
            forbidden_ports=forbidden_ports(self._settings),
            held=self._gateway_ports,
            unbindable=self._unbindable,
        )
        self._gc = parsed.resource
        if self._http_listeners:
            # A new or removed HTTP listener reloads (the controller applies files).
            self._set_http_listeners(self._gc.listeners if self._gc else ())
        who = f"{ref.namespace}/{ref.name}"
        if parsed.problems:
            self._event(
                ref,
                WARNING,
                ADDED_OR_UPDATED_WITH_ERROR,
                f"GlobalConfiguration {who} is updated with errors: {parsed.message()}",
            )
        else:
            self._event(ref, NORMAL, UPDATED, f"GlobalConfiguration {who} was added or updated")

    def _sync_transport_server(self, ref: ObjectRef) -> None:
        obj = self._store.get("TransportServer", ref.namespace, ref.name)
        self._servers.pop(ref, None)
        self._invalid.pop(ref, None)
        if obj is None:
            self._class_checked(ref, "", True)  # deleted: nothing to say
            return
        self._class_checked(ref, _class(obj), _class(obj) in ("", self._served_class()))
        if _class(obj) not in ("", self._served_class()):
            return
        parsed = parse_transport_server(
            obj, tls_passthrough=self._settings.transport.tls_passthrough
        )
        who = f"{ref.namespace}/{ref.name}"
        if parsed.resource is None:
            message = f"TransportServer {who} was rejected with error: {parsed.message()}"
            self._invalid[ref] = message
        elif not self._stream:
            self._invalid[ref] = (
                f"TransportServer {who} was rejected with error: TransportServers need the "
                "nginx data plane with ngx_stream_ferryman_module (scripts/build-module.sh)"
            )
        else:
            self._servers[ref] = parsed.resource

    # ---- the state -----------------------------------------------------------------

    def _recompute(self, changed: set[ObjectRef]) -> None:
        holders: dict[tuple[str, str], TransportServer] = {}
        self._certificates = {}
        outcomes: dict[ObjectRef, Outcome] = {}
        for ref, message in self._invalid.items():
            outcomes[ref] = Outcome(INVALID, REJECTED, message)
        for ref, ts in sorted(self._servers.items(), key=lambda i: age_key(i[1])):
            problem = self._listener_problem(ref, ts)
            if problem is None and (ts.listener, ts.host) in holders:
                host = ts.host or "empty host"
                problem = f"Listener {ts.listener} with host {host} is taken by another resource"
            if problem is not None:
                outcomes[ref] = Outcome(WARNING_STATE, REJECTED, problem)
                continue
            holders[(ts.listener, ts.host)] = ts
            outcomes[ref] = self._served(ref, ts)
        for ref in self._servers.keys() - {_ref(ts) for ts in holders.values()}:
            self._read_secret(ref, None)
        self._write(holders)
        for ref, outcome in outcomes.items():
            if ref in changed or self._reported.get(ref) != outcome:
                self._state(ref, outcome.state, outcome.reason, outcome.message)
        self._reported = outcomes

    def _served(self, ref: ObjectRef, ts: TransportServer) -> Outcome:
        """A holder's outcome; its certificate record, when it ends TLS."""
        who = f"{ref.namespace}/{ref.name}"
        record, why = self._read_secret(ref, ts.tls_secret or None)
        if not ts.tls_secret:
            # NIC's text, its trailing space included.
            return Outcome(
                VALID, ADDED_OR_UPDATED, f"Configuration for {who} was added or updated "
            )
        if record is not None:
            self._certificates[record_name(ts)] = certificate_record(record)
            return Outcome(
                VALID, ADDED_OR_UPDATED, f"Configuration for {who} was added or updated "
            )
        # NIC would serve the listener without TLS; ferryman refuses the handshakes.
        warning = f"TLS secret {ts.tls_secret} is invalid: {why}; TLS handshakes are refused"
        return Outcome(
            WARNING_STATE,
            ADDED_OR_UPDATED_WITH_WARNING,
            f"Configuration for {who} was added or updated with warning(s): {warning}",
        )

    def _listener_problem(self, ref: ObjectRef, ts: TransportServer) -> str | None:
        if ts.passthrough:
            if self._owner(ts.host) != ref:
                return "Host is taken by another resource"
            return None
        if self._gc is None or self._gc.listener(ts.listener, ts.protocol) is None:
            return f"Listener {ts.listener} doesn't exist"
        return None

    def _write(self, holders: Mapping[tuple[str, str], TransportServer]) -> None:
        streams: dict[ObjectRef, dict[str, str]] = {}
        for ts in holders.values():
            streams.setdefault(_ref(ts), {})[record_name(ts)] = stream_record(ts)
        for ref in set(self._record_writers.values()) - streams.keys():
            self._write_streams(ref, {})
        for ref, wanted in streams.items():
            self._write_streams(ref, wanted)
        self._write_records(CERTIFICATE_RECORD, dict(self._certificates))
        self._record_writers = {record_name(ts): _ref(ts) for ts in holders.values()}
        holder_refs = {_ref(ts) for ts in holders.values()}
        for ref in self._holders - holder_refs:
            self._set_backends(ref, frozenset())
        for ts in holders.values():
            self._set_backends(_ref(ts), backends(ts))
        self._holders = holder_refs
        if not self._stream:
            return
        by_listener = {name: ts for (name, _), ts in holders.items()}
        # A listener ends TLS when a TransportServer holding it has tls.secret.
        ssl = {name for (name, _), ts in holders.items() if ts.tls_secret}
        servers: list[StreamServer] = []
        for listener in self._gc.listeners if self._gc else ():
            if listener.protocol in ("TCP", "UDP"):
                holder = by_listener.get(listener.name)
                servers.append(stream_server(listener, holder, listener.name in ssl))
        self._files[STREAM_FILE] = render_stream(
            servers, self._passthrough(), ipv6=not self._settings.listen.disable_ipv6
        )


def _ref(ts: TransportServer) -> ObjectRef:
    return ObjectRef("TransportServer", ts.meta.namespace, ts.meta.name)


def _class(obj: Mapping[str, object]) -> str:
    spec = obj.get("spec")
    value = spec.get("ingressClassName") if isinstance(spec, Mapping) else None
    return value if isinstance(value, str) else ""
