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
from ferryman.kinds.ingress.parse.ingressclass import ClassPolicy
from ferryman.resources.meta import ObjectRef
from ferryman.translators.other_class import OtherClass
from ferryman.wire.records import HOST_RECORDS, Record, RecordKey

log = logging.getLogger("ferryman.controller")


# The key of the default server's certificate record (a certificate id is
# namespace/name@digest, never this): ferryman_certificates.lua's default().
DEFAULT_CERTIFICATE = "!default"


class Desired:
    def __init__(self, settings: Settings, store: Store, secrets: SecretStore) -> None:
        policy = settings.allowed_host_suffixes
        self.config = Configuration(HostPolicy(policy) if policy else None)
        # The class served (changes with the IngressClass object).
        self.policy = ClassPolicy(settings.ingress_class, None)
        self.records: dict[RecordKey, str] = {}
        # Who wrote each virtual host, which hosts each resource wrote, and the
        # certificate each host serves.
        self.host_writer: dict[str, ObjectRef] = {}
        self.ref_hosts: dict[ObjectRef, set[str]] = {}
        self.host_cert: dict[str, str] = {}
        # Who wrote each S record (stream routing) of the TLS passthrough
        # listener: a TransportServer or an Ingress with ssl-passthrough, the
        # host's owner; each drops only its own.
        self.stream_writer: dict[str, ObjectRef] = {}
        # The names each ``write_streams`` caller wrote, so that an Ingress's
        # translation touches its own few, not every S record.
        self._streams_of: dict[ObjectRef, set[str]] = {}
        gates = settings.ingress_class if settings.gates.enabled else None
        self.endpoints = EndpointSets(
            store,
            self.records,
            gates,
            track_nodes=settings.drain.machine_hooks != "off",
            track_pods=settings.nginx.latency_metrics,
        )
        self.deps = Dependencies()
        self.cache = Cache(store, secrets, settings)
        # --default-server-tls-secret, and why it is unusable ("" : it is usable).
        self.default_tls = settings.tls.default_server_secret
        self._default_tls_error: str | None = None
        # Events to report at the next flush, and for NIC's custom resources
        # the state (status.state) and referencedBy each reports.
        self.pending: dict[ObjectRef, tuple[str, str, str]] = {}
        self.states: dict[ObjectRef, str] = {}
        self.referenced_by: dict[ObjectRef, str] = {}
        # Readers of changed referenced objects (KindSpec.referenced), translated
        # once per batch: a selector's reader would otherwise be translated once
        # per object it read.
        self.stale: set[ObjectRef] = set()
        # Resources left to another class (said once each).
        self.other_class = OtherClass()
        # What served VirtualServers ask of cert-manager (certificates/).
        self.certificates = Asked()

    def event(
        self, ref: ObjectRef, type_: str, reason: str, message: str, state: str | None = None
    ) -> None:
        """The Event ``ref`` reports at the next flush (the last one said wins)."""
        self.pending[ref] = (type_, reason, message)
        if state is not None:
            self.states[ref] = state

    def class_checked(
        self, ref: ObjectRef, class_name: str | None, served: bool, why: str | None = None
    ) -> None:
        """``ref`` (present) names ``class_name``, which ferryman ``served`` or not
        (``why``: the reason, when not the IngressClass one). One not served is
        said once (info): another controller's objects are no one's error but a
        newcomer's surprise (NIC's examples name class nginx)."""
        if self.other_class.checked(ref, class_name, served, why):
            served_class = self.policy.served
            log.info(
                f"{ref.kind} skipped: {self.other_class.reason(ref, served_class)}",
                extra={"fields": {"kind": ref.kind, "key": str(ref).partition(" ")[2],
                                  "class": class_name or "(none)", "served": served_class}},
            )  # fmt: skip

    def referenced_changed(self, ref: ObjectRef) -> None:
        """A Secret, Policy or VirtualServerRoute changed: its readers translate
        again before the next flush."""
        self.cache.forget(ref)
        self.stale |= self.deps.users(ref)

    def declare(self, ref: ObjectRef, used: Iterable[ObjectRef]) -> None:
        """What ``ref``'s translation read; parses nobody reads any more are dropped."""
        for gone in self.deps.declare(ref, used):
            if not self.deps.used(gone):
                self.cache.forget(gone)

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
        self.records[(Record.HOST, vh.host)] = encode_host(vh)
        records = (
            (Record.ROUTING, routing),
            (Record.CLIENT_CHECK, client_check),
            (Record.FAST_ROUTES, fast),
        )
        for kind, value in records:
            if value is None:
                self.records.pop((kind, vh.host), None)
            else:
                self.records[(kind, vh.host)] = value
        self.host_writer[vh.host] = ref
        if vh.cert_id:
            self.host_cert[vh.host] = vh.cert_id
        else:
            self.host_cert.pop(vh.host, None)

    def latency_owner(self, host: str, backend: str, server: str) -> ObjectRef | None:
        """The Ingress routing virtual host ``host`` to ``backend`` when ``server``
        (``address:port`` as NGINX logs it) is one of that backend's peers; None
        for anything else (a forged or stale latency sample)."""
        owner = self.host_writer.get(host)
        if owner is None or backend not in self.endpoints.backends_of(owner):
            return None
        peers = self.records.get((Record.ENDPOINTS, backend))
        address, _, port = server.rpartition(":")
        return owner if peers and f"{address.strip('[]')}#{port}" in peers.split(" ") else None

    def latency_pod(self, backend: str, server: str) -> str:
        """The pod name of ``server`` (``address:port``) among ``backend``'s peers."""
        address = server.rpartition(":")[0].strip("[]")
        return self.endpoints.pod_of(backend, address)

    def drop_host(self, host: str) -> None:
        del self.host_writer[host]
        for kind in HOST_RECORDS:
            self.records.pop((kind, host), None)
        self.host_cert.pop(host, None)

    def write_streams(self, ref: ObjectRef, wanted: Mapping[str, str]) -> None:
        """``ref``'s S records (name -> value) are ``wanted``: the others it wrote go
        (unless another writer has taken the name since)."""
        for name in self._streams_of.pop(ref, set()) - wanted.keys():
            if self.stream_writer.get(name) == ref:
                del self.stream_writer[name]
                self.records.pop((Record.STREAM, name), None)
        for name, value in wanted.items():
            self.records[(Record.STREAM, name)] = value
            self.stream_writer[name] = ref
        if wanted:
            self._streams_of[ref] = set(wanted)

    def drop_hosts_of(self, ref: ObjectRef, keep: Iterable[str] = ()) -> None:
        """Drop the hosts ``ref`` wrote but for ``keep``, found by writer rather
        than ``ref_hosts``: a render that failed half-way may have written hosts
        it has not recorded there."""
        kept = set(keep)
        for host in [h for h, w in self.host_writer.items() if w == ref and h not in kept]:
            self.drop_host(host)

    def certificate_records(self, secrets: SecretStore) -> None:
        """Hold exactly the certificates some virtual host refers to, and the
        default server's (``DEFAULT_CERTIFICATE``)."""
        needed = set(self.host_cert.values())
        for key in [k for k in self.records if k[0] == Record.CERTIFICATE and k[1] not in needed]:
            del self.records[key]
        self._default_certificate(secrets)
        for cert_id in needed:
            if (Record.CERTIFICATE, cert_id) not in self.records:
                record = secrets.record(cert_id)
                if record is not None:
                    self.records[(Record.CERTIFICATE, cert_id)] = record

    def _default_certificate(self, secrets: SecretStore) -> None:
        """--default-server-tls-secret's pair under ``DEFAULT_CERTIFICATE``: read
        every flush (a cached parse), so a changed Secret is pushed, never reloaded.
        Unusable: no record, so the default server rejects handshakes as without
        the flag, and one warning per new reason."""
        if self.default_tls is None:
            return
        namespace, name = self.default_tls
        state = self.cache.secret(namespace, name)
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
            self.records.pop((Record.CERTIFICATE, DEFAULT_CERTIFICATE), None)
        else:
            self.records[(Record.CERTIFICATE, DEFAULT_CERTIFICATE)] = record
