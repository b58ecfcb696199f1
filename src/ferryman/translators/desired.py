"""What the worker wants NGINX to hold, shared by the kinds' translators.

Every translator writes here and only here: records (virtual hosts, their
routing, certificates by reference, endpoint sets through ``EndpointSets``),
which resource wrote which host, what each translation read (so a change to a
Secret, Policy or VirtualServerRoute translates exactly its readers again), and
the Events waiting for the flush that makes them true. The worker
(engine/controller.py) pushes the records and reports the Events; host ownership
across kinds is ``Configuration``'s.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from ferryman.certificates.wanted import Asked
from ferryman.configs.model import VirtualHost
from ferryman.configs.routes import encode_host
from ferryman.engine.configuration import Configuration, HostPolicy
from ferryman.engine.dependencies import Dependencies
from ferryman.engine.endpoint_sets import EndpointSets
from ferryman.engine.reads import Cache
from ferryman.engine.secrets import SecretStore
from ferryman.engine.settings import Settings
from ferryman.engine.store import Store
from ferryman.resources.ingress_class import ClassPolicy
from ferryman.resources.meta import ObjectRef
from ferryman.translators.other_class import OtherClass
from ferryman.translators.tracked_records import TrackedRecords
from ferryman.wire.records import HOST_RECORDS, Record, RecordKey

log = logging.getLogger("ferryman.controller")


# The key of the default server's certificate record (a certificate id is
# namespace/name@digest, never this): ferryman_certificates.lua's default().
DEFAULT_CERTIFICATE = "!default"

# An Event to report: (type, reason, message).
Event = tuple[str, str, str]


class Desired:
    """The records and Events the worker's next flush makes true. Its state is
    its own: translators write and read it through the methods below, and the
    parts with state of their own (host ownership, endpoint sets, the parse
    cache, the class served) are handed out as themselves."""

    def __init__(self, settings: Settings, store: Store, secrets: SecretStore) -> None:
        policy = settings.allowed_host_suffixes
        self._config = Configuration(HostPolicy(policy) if policy else None)
        self._policy = ClassPolicy(settings.ingress_class, None)
        self._records = TrackedRecords()
        # The names of the C records: each flush drops those no host needs
        # without looking at every record.
        self._certificate_names: set[str] = set()
        # Who wrote each virtual host, the hosts each resource serves (its
        # status shows them), and the certificate each host serves.
        self._host_writer: dict[str, ObjectRef] = {}
        # The same, by writer: a render drops its own hosts without scanning
        # every host (10,000 Ingresses starting: 26 s of CPU spent scanning).
        self._hosts_by_writer: dict[ObjectRef, set[str]] = {}
        self._ref_hosts: dict[ObjectRef, set[str]] = {}
        self._host_cert: dict[str, str] = {}
        # Who wrote each S record (stream routing) of the TLS passthrough
        # listener: a TransportServer or an Ingress with ssl-passthrough, the
        # host's owner; each drops only its own.
        self._stream_writer: dict[str, ObjectRef] = {}
        # The names each ``write_streams`` caller wrote, so that an Ingress's
        # translation touches its own few, not every S record.
        self._streams_of: dict[ObjectRef, set[str]] = {}
        # The names each ``write_records`` share (kind, prefix) holds: a
        # TransportServer's change touches its own few, not every record.
        self._written: dict[tuple[str, str], set[str]] = {}
        gates = settings.ingress_class if settings.gates.enabled else None
        self._endpoints = EndpointSets(
            store,
            self._records,
            gates,
            track_nodes=settings.drain.machine_hooks != "off",
            track_pods=settings.nginx.latency_metrics,
        )
        self._deps = Dependencies()
        self._cache = Cache(store, secrets, settings)
        # --default-server-tls-secret, and why it is unusable ("" : it is usable).
        self._default_tls = settings.tls.default_server_secret
        self._default_tls_error: str | None = None
        # Events to report at the next flush, and for NIC's custom resources
        # the state (status.state) and referencedBy each reports.
        self._pending: dict[ObjectRef, Event] = {}
        self._states: dict[ObjectRef, str] = {}
        self._referenced_by: dict[ObjectRef, str] = {}
        # Readers of changed referenced objects (KindSpec.referenced), translated
        # once per batch: a selector's reader would otherwise be translated once
        # per object it read.
        self._stale: set[ObjectRef] = set()
        # Resources left to another class (said once each).
        self._other_class = OtherClass()
        # What served VirtualServers ask of cert-manager (certificates/).
        self._certificates = Asked()

    # ---- the parts with state of their own ------------------------------------------

    @property
    def config(self) -> Configuration:
        """Who owns each host, across kinds."""
        return self._config

    @property
    def policy(self) -> ClassPolicy:
        """The class served, as the IngressClass object says."""
        return self._policy

    def set_policy(self, policy: ClassPolicy) -> None:
        self._policy = policy

    @property
    def endpoints(self) -> EndpointSets:
        """The endpoint sets the served resources route to (their E records)."""
        return self._endpoints

    @property
    def cache(self) -> Cache:
        """Parsed Secrets, Policies and the other objects translations read."""
        return self._cache

    @property
    def other_class(self) -> OtherClass:
        return self._other_class

    @property
    def certificates(self) -> Asked:
        return self._certificates

    # ---- records ---------------------------------------------------------------------

    @property
    def records(self) -> Mapping[RecordKey, str]:
        """Every record wanted, read-only (the flush compares it with NGINX's)."""
        return self._records.view()

    def take_touched_records(self) -> set[RecordKey]:
        """The record keys written or removed since the last call: only these
        can differ from NGINX's beyond what the last flush left unsent."""
        return self._records.take_touched()

    def write_records(self, kind: str, wanted: Mapping[str, str], prefix: str = "") -> None:
        """The records of ``kind`` whose names start with ``prefix`` are exactly
        ``wanted`` (a kind, or a share of one, only one writer writes)."""
        for name in self._written.pop((kind, prefix), set()) - wanted.keys():
            self._records.pop((kind, name), None)
        for name, value in wanted.items():
            self._records[(kind, name)] = value
        if wanted:
            self._written[(kind, prefix)] = set(wanted)

    def writer_of(self, host: str) -> ObjectRef | None:
        """The resource that wrote virtual host ``host``'s records."""
        return self._host_writer.get(host)

    def hosts_with_certificate(self, cert_id: str) -> list[str]:
        return [h for h, cert in self._host_cert.items() if cert == cert_id]

    def note_certificates(self, prefix: str, certificates: Mapping[str, str]) -> None:
        """The certificates (name -> certificate id) records other than host
        records serve, under names starting with ``prefix`` that no host has:
        C records are pushed for them as for a host's."""
        for name in [n for n in self._host_cert if n.startswith(prefix)]:
            del self._host_cert[name]
        self._host_cert.update(certificates)

    # ---- the hosts a resource serves (its status) ------------------------------------

    def serve(self, ref: ObjectRef, hosts: Iterable[str]) -> None:
        """``ref`` is served, on ``hosts`` (none: on another's, a minion's or a
        canary's); its status shows it."""
        self._ref_hosts[ref] = set(hosts)

    def forget_served(self, ref: ObjectRef) -> set[str]:
        """``ref`` is no longer served: the hosts it was served on."""
        return self._ref_hosts.pop(ref, set())

    def is_served(self, ref: ObjectRef) -> bool:
        return ref in self._ref_hosts

    # ---- what translations read, and who reads it again ------------------------------

    def readers_of(self, ref: ObjectRef) -> set[ObjectRef]:
        """The resources whose last translation read ``ref``."""
        return self._deps.users(ref)

    def mark_stale(self, refs: Iterable[ObjectRef]) -> None:
        """Translate ``refs`` again before the next flush (once each per batch)."""
        self._stale.update(refs)

    def take_stale(self) -> set[ObjectRef]:
        stale, self._stale = self._stale, set()
        return stale

    def has_stale(self) -> bool:
        return bool(self._stale)

    # ---- Events and NIC's status ---------------------------------------------------

    def referenced(self, ref: ObjectRef, by: str) -> None:
        """The referencedBy ``ref``'s status reports with its next state."""
        self._referenced_by[ref] = by

    def take_events(self) -> dict[ObjectRef, Event]:
        """The Events to report now (``hold_event`` puts one back)."""
        pending, self._pending = self._pending, {}
        return pending

    def hold_event(self, ref: ObjectRef, event: Event) -> None:
        """Report ``event`` at a later flush, unless a newer one is said first."""
        self._pending.setdefault(ref, event)

    def take_state(self, ref: ObjectRef) -> tuple[str, str | None] | None:
        """The status.state ``ref``'s reported Event carries, and its referencedBy."""
        state = self._states.pop(ref, None)
        return (state, self._referenced_by.pop(ref, None)) if state else None

    def event(
        self, ref: ObjectRef, type_: str, reason: str, message: str, state: str | None = None
    ) -> None:
        """The Event ``ref`` reports at the next flush (the last one said wins)."""
        self._pending[ref] = (type_, reason, message)
        if state is not None:
            self._states[ref] = state

    def class_checked(
        self, ref: ObjectRef, class_name: str | None, served: bool, why: str | None = None
    ) -> None:
        """``ref`` (present) names ``class_name``, which ferryman ``served`` or not
        (``why``: the reason, when not the IngressClass one). One not served is
        said once (info): another controller's objects are no one's error but a
        newcomer's surprise (NIC's examples name class nginx)."""
        if self._other_class.checked(ref, class_name, served, why):
            served_class = self._policy.served
            log.info(
                f"{ref.kind} skipped: {self._other_class.reason(ref, served_class)}",
                extra={"fields": {"kind": ref.kind, "key": str(ref).partition(" ")[2],
                                  "class": class_name or "(none)", "served": served_class}},
            )  # fmt: skip

    def referenced_changed(self, ref: ObjectRef) -> None:
        """A Secret, Policy or VirtualServerRoute changed: its readers translate
        again before the next flush."""
        self._cache.forget(ref)
        self._stale |= self._deps.users(ref)

    def declare(self, ref: ObjectRef, used: Iterable[ObjectRef]) -> None:
        """What ``ref``'s translation read; parses nobody reads any more are dropped."""
        for gone in self._deps.declare(ref, used):
            if not self._deps.used(gone):
                self._cache.forget(gone)

    def write_host(
        self,
        ref: ObjectRef,
        vh: VirtualHost,
        routing: str | None,
        client_check: str | None = None,
        fast: str | None = None,
    ) -> None:
        """``vh``'s H record and, where given, its V record (``routing``), M
        record (``client_check``: ingressMTLS) and F record (``fast``: vs_fast)."""
        self._records[(Record.HOST, vh.host)] = encode_host(vh)
        records = (
            (Record.ROUTING, routing),
            (Record.CLIENT_CHECK, client_check),
            (Record.FAST_ROUTES, fast),
        )
        for kind, value in records:
            if value is None:
                self._records.pop((kind, vh.host), None)
            else:
                self._records[(kind, vh.host)] = value
        previous = self._host_writer.get(vh.host)
        if previous is not None and previous != ref:
            self._forget_writer(previous, vh.host)
        self._host_writer[vh.host] = ref
        self._hosts_by_writer.setdefault(ref, set()).add(vh.host)
        if vh.cert_id:
            self._host_cert[vh.host] = vh.cert_id
        else:
            self._host_cert.pop(vh.host, None)

    def latency_owner(self, host: str, backend: str, server: str) -> ObjectRef | None:
        """The Ingress routing virtual host ``host`` to ``backend`` when ``server``
        (``address:port`` as NGINX logs it) is one of that backend's peers; None
        for anything else (a forged or stale latency sample)."""
        owner = self._host_writer.get(host)
        if owner is None or backend not in self._endpoints.backends_of(owner):
            return None
        peers = self._records.get((Record.ENDPOINTS, backend))
        address, _, port = server.rpartition(":")
        return owner if peers and f"{address.strip('[]')}#{port}" in peers.split(" ") else None

    def latency_pod(self, backend: str, server: str) -> str:
        """The pod name of ``server`` (``address:port``) among ``backend``'s peers."""
        address = server.rpartition(":")[0].strip("[]")
        return self._endpoints.pod_of(backend, address)

    def drop_host(self, host: str) -> None:
        self._forget_writer(self._host_writer.pop(host), host)
        for kind in HOST_RECORDS:
            self._records.pop((kind, host), None)
        self._host_cert.pop(host, None)

    def write_streams(self, ref: ObjectRef, wanted: Mapping[str, str]) -> None:
        """``ref``'s S records (name -> value) are ``wanted``: the others it wrote go
        (unless another writer has taken the name since)."""
        for name in self._streams_of.pop(ref, set()) - wanted.keys():
            if self._stream_writer.get(name) == ref:
                del self._stream_writer[name]
                self._records.pop((Record.STREAM, name), None)
        for name, value in wanted.items():
            self._records[(Record.STREAM, name)] = value
            self._stream_writer[name] = ref
        if wanted:
            self._streams_of[ref] = set(wanted)

    def stream_writer_of(self, name: str) -> ObjectRef | None:
        """Who wrote S record ``name`` through ``write_streams``."""
        return self._stream_writer.get(name)

    def stream_writers(self) -> dict[str, ObjectRef]:
        """S record name -> who wrote it (a copy)."""
        return dict(self._stream_writer)

    def drop_hosts_of(self, ref: ObjectRef, keep: Iterable[str] = ()) -> None:
        """Drop the hosts ``ref`` wrote but for ``keep``, found by writer rather
        than ``ref_hosts``: a render that failed half-way may have written hosts
        it has not recorded there."""
        for host in self._hosts_by_writer.get(ref, set()) - set(keep):
            self.drop_host(host)

    def _forget_writer(self, writer: ObjectRef, host: str) -> None:
        hosts = self._hosts_by_writer.get(writer)
        if hosts is not None:
            hosts.discard(host)
            if not hosts:
                del self._hosts_by_writer[writer]

    def certificate_records(self, secrets: SecretStore) -> None:
        """Hold exactly the certificates some virtual host refers to, and the
        default server's (``DEFAULT_CERTIFICATE``)."""
        needed = set(self._host_cert.values())
        for name in [n for n in self._certificate_names if n not in needed]:
            self._records.pop((Record.CERTIFICATE, name), None)
            self._certificate_names.discard(name)
        self._default_certificate(secrets)
        for cert_id in needed:
            if (Record.CERTIFICATE, cert_id) not in self._records:
                record = secrets.record(cert_id)
                if record is not None:
                    self._records[(Record.CERTIFICATE, cert_id)] = record
                    self._certificate_names.add(cert_id)

    def _default_certificate(self, secrets: SecretStore) -> None:
        """--default-server-tls-secret's pair under ``DEFAULT_CERTIFICATE``: read
        every flush (a cached parse), so a changed Secret is pushed, never reloaded.
        Unusable: no record, so the default server rejects handshakes as without
        the flag, and one warning per new reason."""
        if self._default_tls is None:
            return
        namespace, name = self._default_tls
        state = self._cache.secret(namespace, name)
        record = secrets.record(state.cert_id) if state.cert_id else None
        error = "" if record is not None else (state.error or "unusable")
        if error != self._default_tls_error:
            self._default_tls_error = error
            fields = {"secret": f"{namespace}/{name}"}
            if error:
                log.warning(
                    "the default server TLS secret (--default-server-tls-secret) is "
                    f"unusable ({error}): handshakes naming no served host are rejected",
                    extra={"fields": fields},
                )
            else:
                log.info("default server TLS secret in use", extra={"fields": fields})
        if record is None:
            self._records.pop((Record.CERTIFICATE, DEFAULT_CERTIFICATE), None)
            self._certificate_names.discard(DEFAULT_CERTIFICATE)
        else:
            self._records[(Record.CERTIFICATE, DEFAULT_CERTIFICATE)] = record
            self._certificate_names.add(DEFAULT_CERTIFICATE)
