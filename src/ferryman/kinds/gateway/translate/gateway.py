"""Gateway API (--enable-gateway-api): GatewayClasses naming ferryman's
controller, their Gateways (with the ListenerSets' listeners they admit:
records/listener_sets.py), the routes attached to them and
the ReferenceGrants they need -> the Gateway server's sockets, W records, the
TLS listeners' stream servers and S records, and every object's status.

Attachment depends on everything at once (a route's acceptance on a listener's
hostname and namespaces, a listener's attached routes on every route, a
backend's resolution on Services and grants), so the translator does not
translate one object: a change to any of its kinds, to a Service, a
Namespace's labels or a certificate's Secret marks it stale, and ``prepare``
computes the whole Gateway state once per batch, before the flush pushes the
records. Statuses are published after the flush (``publish``), each only
when it changed.

Host ownership across APIs: a Gateway serves its hostnames on its own
sockets (its address from --gateway-addresses, its listeners' ports), which
Ingress and VirtualServer hosts never share; so a name claimed by an Ingress
and a Gateway listener is served by both, each where it listens. Without an
address pool every Gateway listens on all addresses, and ferryman's own ports
(the Ingress listeners among them) are refused to its listeners
(PortUnavailable) rather than shared; so are a GlobalConfiguration listener's
port, a port NGINX could not bind, and an Ingress's ``listen-ports`` port when
that Ingress is older (one owner per port, the oldest: listen_ports.py keeps
the Ingresses' side and is told which ports the Gateways keep).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from ferryman.configs.model import BackendKey
from ferryman.engine.reads import Reads
from ferryman.engine.settings import Settings
from ferryman.engine.store import Store
from ferryman.kinds.gateway.parse.backend_tls import BackendTLSPolicy, parse_backend_tls_policy
from ferryman.kinds.gateway.parse.gateway_api import (
    Gateway,
    parse_gateway,
    parse_http_route,
)
from ferryman.kinds.gateway.parse.gateway_class import parse_gateway_class
from ferryman.kinds.gateway.parse.grpc_route import parse_grpc_route
from ferryman.kinds.gateway.parse.listener_set import parse_listener_set
from ferryman.kinds.gateway.parse.tls_route import parse_tls_route
from ferryman.kinds.gateway.records import frontend_tls
from ferryman.kinds.gateway.records.addresses import Asking, Outcome, assign
from ferryman.kinds.gateway.records.attach import Route, attach, route_id, route_kind
from ferryman.kinds.gateway.records.backend_client_cert import client_certificates
from ferryman.kinds.gateway.records.backend_protocols import mark_h2c
from ferryman.kinds.gateway.records.listener_sets import merge, split
from ferryman.kinds.gateway.records.listeners import listener_status
from ferryman.kinds.gateway.records.passthrough import (
    PASSTHROUGH_FILE,
    PassthroughServed,
    certificate_records,
    passthrough_records,
    render_passthrough,
)
from ferryman.kinds.gateway.records.servers import (
    GATEWAY_LISTENS_FILE,
    Served,
    render_hops,
    render_listens,
    routes_in,
)
from ferryman.kinds.gateway.records.status import (
    gateway_class_status,
    invalid_gateway_status,
    parameters_problem,
    route_parents,
)
from ferryman.kinds.gateway.translate import backend_tls, listener_sets
from ferryman.kinds.gateway.translate.classes import age, skipped
from ferryman.kinds.gateway.translate.fit import fit_routes, not_accepted, without
from ferryman.kinds.gateway.translate.ports import PortRules
from ferryman.kinds.gateway.translate.serving import backends_used, serving
from ferryman.report import REJECTED, WARNING, GatewayStatusSink
from ferryman.resources.meta import ObjectRef
from ferryman.resources.nic_fields import Parsed
from ferryman.resources.reference_grant import ReferenceGrant, parse_reference_grant
from ferryman.translators import Translator
from ferryman.translators.context import Context
from ferryman.translators.desired import Desired
from ferryman.translators.listen_ports import ListenPorts
from ferryman.translators.renders import Renders
from ferryman.wire.records import Record

log = logging.getLogger("ferryman.gateway")

KINDS = ("GatewayClass", "Gateway", "ListenerSet", "HTTPRoute", "GRPCRoute", "TLSRoute",
         "ReferenceGrant", "BackendTLSPolicy")  # fmt: skip
ROUTES = ("HTTPRoute", "GRPCRoute", "TLSRoute")
# Where W records' certificates are noted (Desired.note_certificates: no host name
# holds a ":", so these never meet an Ingress's or VirtualServer's host).
_CERT_PREFIX = "gateway:"


class GatewayTranslator(Translator):
    kinds: tuple[str, ...] = KINDS
    renders: tuple[str, ...] = ("Gateway", *ROUTES)
    rejected_state: str | None = None
    # The S records of TLS listeners are TransportServers' kind too; the
    # engine asks one owner per kind, and theirs never share a name with ours
    # (records/passthrough.py), nor are refused (a few validated fields).
    records: tuple[str, ...] = (Record.GATEWAY, Record.GATEWAY_CLIENT)

    def __init__(
        self,
        settings: Settings,
        store: Store,
        desired: Desired,
        renders: Renders,
        files: MutableMapping[str, str],
        status: GatewayStatusSink | None,
        ports: ListenPorts | None = None,
        stream: bool = False,
        h2c: bool = True,
        h2c_hop: bool = False,
    ) -> None:
        """``ports``: the Ingresses' listen ports and the GlobalConfiguration's
        listeners (None: neither is served); it is told the ports Gateways
        keep, where a younger GlobalConfiguration's listeners are left out
        (kinds/transport/translate/servers.py). ``stream``: NGINX has the
        stream module, so TLS listeners pass TLS through. ``h2c``: HTTP
        listeners serve HTTP/2 without TLS beside HTTP/1.1 (GRPCRoutes);
        ``h2c_hop``: through the stream block (Debian's 1.22), where their
        sockets are then written."""
        self._stream = stream
        self._h2c = h2c
        self._h2c_hop = h2c_hop and stream
        self._settings = settings
        self._ports = ports
        self._port_rules = PortRules(settings, store, ports)
        self._store = store
        self._d = desired
        self._renders = renders
        self._files = files
        self._sink = status
        self._stale = True
        # Each object's parse, with the raw object it was made from: the store
        # replaces an object on change, so an unchanged one is not parsed again.
        self._parsed: dict[ObjectRef, _Parse] = {}
        self._assigned: dict[tuple[str, str], str] = {}
        self._status_addresses: tuple[str, ...] = ()
        self._wanted: dict[ObjectRef, Mapping[str, Any]] = {}
        # What was sent, with the uid of the object it was sent for: an object
        # deleted and created again within a batch gets its status again.
        self._sent: dict[ObjectRef, tuple[str | None, Mapping[str, Any]]] = {}
        self._route_backends: dict[ObjectRef, frozenset[BackendKey]] = {}
        self._rejected: dict[ObjectRef, str] = {}
        # HTTPRoutes left out for --max-record-bytes (kinds/gateway/translate/fit.py).
        self._left_out: dict[ObjectRef, str] = {}
        # Routes in a W record NGINX refused: the parse they were refused with, why.
        self._refused: dict[ObjectRef, tuple[object, str]] = {}
        self._served: list[Served] = []
        files.setdefault(GATEWAY_LISTENS_FILE, render_listens(()))
        if stream:
            files.setdefault(PASSTHROUGH_FILE, render_passthrough(()))
        self._ipv6 = not settings.listen.disable_ipv6  # every-address sockets on IPv6 too

    # ---- Translator protocol -------------------------------------------------------

    def sync(self, ref: ObjectRef) -> None:
        self._stale = True

    def render(self, ref: ObjectRef) -> None:
        self._stale = True

    def withdraw(self, ref: ObjectRef) -> None:
        self._stale = True

    # ---- the worker's hooks --------------------------------------------------------

    def touch(self) -> None:
        """A Service or Namespace changed: attachment may have."""
        self._stale = True

    def set_addresses(self, addresses: tuple[str, ...]) -> None:
        """The addresses Ingress status shows: Gateways' without an address pool."""
        if addresses != self._status_addresses:
            self._status_addresses = addresses
            self._stale = True

    def before_flush(self) -> None:
        """Compute the Gateway state if anything it depends on changed."""
        if not self._stale:
            return
        self._stale = False
        try:
            self._compute()
        except Exception:
            # Keep what NGINX holds and say so; the next change tries again.
            log.exception("gateway translation failed")

    def after_flush(self) -> None:
        """Send each status that changed since it was last sent."""
        if self._sink is None:
            return
        for ref, status in sorted(self._wanted.items()):
            sent = (self._store.uid(ref), status)
            if self._sent.get(ref) != sent:
                self._sink(ref, status)
                self._sent[ref] = sent
        for ref in [r for r in self._sent if r not in self._wanted]:
            del self._sent[ref]

    # ---- the computation -----------------------------------------------------------

    def _parse_all(self, kind: str, parser: Any) -> list[tuple[ObjectRef, _Parse]]:
        """Every object of ``kind``, parsed; only those the store replaced since
        the last time are read and parsed again (Store.stamp)."""
        store = self._store
        out = []
        for ref in store.refs(kind):
            stamp = store.stamp(kind, ref.namespace, ref.name)
            cached = self._parsed.get(ref)
            if cached is None or cached.stamp is not stamp:
                obj = store.get(kind, ref.namespace, ref.name) or {}
                meta = obj.get("metadata") or {}
                spec = obj.get("spec") or {}
                cached = _Parse(
                    stamp,
                    parser(obj),
                    str(spec.get("gatewayClassName") or "") if isinstance(spec, Mapping) else "",
                    int(meta.get("generation") or 0) if isinstance(meta, Mapping) else 0,
                )
                self._parsed[ref] = cached
            out.append((ref, cached))
        return out

    def _reject(self, ref: ObjectRef, why: str) -> None:
        message = f"{ref.namespace}/{ref.name} was rejected: {why}"
        if self._rejected.get(ref) != message:
            self._rejected[ref] = message
            self._d.event(ref, WARNING, REJECTED, message)

    def refuse_record(self, kind: str, key: str, why: str) -> None:
        """NGINX refused W record ``key`` (``why``: the limit it hit): the routes
        in it are left out of every record, with Accepted False and a Rejected
        Event saying so, until they change; the records are computed again at
        the next ``before_flush``."""
        routes = routes_in(self._served, key)
        if not routes:  # a listener's own record: no route to tell
            fields = {"key": key, "why": why}
            log.warning("NGINX refused a Gateway record", extra={"fields": fields})
        for route in sorted(routes):
            ref = ObjectRef(*route_kind(route))
            parse = self._parsed.get(ref)
            self._refused[ref] = (parse.stamp if parse else None, f"the Gateway record {key} {why}")
        self._stale = True

    def _still_refused(self) -> dict[str, str]:
        """The routes NGINX refused a record of, less those changed since."""
        for ref, (stamp, _) in list(self._refused.items()):
            parse = self._parsed.get(ref)
            if parse is None or parse.stamp is not stamp:
                del self._refused[ref]
        return {f"{r.namespace}/{r.name}": why for r, (_, why) in self._refused.items()}

    def _refuse(self, ref: ObjectRef, why: str | None) -> None:
        """A Rejected Event for a route left out of its listeners' records, once
        each time it is left out."""
        if why is None:
            self._left_out.pop(ref, None)
        elif self._left_out.get(ref) != why:
            self._left_out[ref] = why
            self._d.event(ref, WARNING, REJECTED, f"{ref.namespace}/{ref.name} was rejected: {why}")

    def _compute(self) -> None:
        store, settings = self._store, self._settings
        wanted: dict[ObjectRef, Mapping[str, Any]] = {}
        seen: set[ObjectRef] = set()
        classes: set[str] = set()
        controllers: dict[str, str] = {}  # every GatewayClass's controllerName
        for ref, p in self._parse_all("GatewayClass", parse_gateway_class):
            seen.add(ref)
            gc = p.parsed.resource
            if gc is not None:
                controllers[gc.meta.name] = gc.controller
            if gc is not None and gc.controller == settings.gateway.controller_name:
                classes.add(gc.meta.name)
                wanted[ref] = gateway_class_status(gc.meta.generation, True)
        gateways: list[Gateway] = []
        for ref, p in self._parse_all("Gateway", parse_gateway):
            seen.add(ref)
            ours = p.class_name in classes
            self._d.class_checked(ref, p.class_name, ours, skipped(p.class_name, controllers))
            if not ours:
                continue
            if p.parsed.resource is None:
                self._reject(ref, p.parsed.message())
                wanted[ref] = invalid_gateway_status(p.generation, p.parsed.message())
                continue
            if (why := parameters_problem(p.parsed.resource)) is not None:
                self._reject(ref, why)
                wanted[ref] = invalid_gateway_status(p.generation, why, "InvalidParameters")
                continue
            gateways.append(p.parsed.resource)
        gateways.sort(key=age)
        set_parses = self._parse_all("ListenerSet", parse_listener_set)
        seen.update(ref for ref, _ in set_parses)
        sets = listener_sets.parsed(set_parses, self._reject)
        routes: list[Route] = []
        for kind, parser in (
            ("HTTPRoute", parse_http_route),
            ("GRPCRoute", parse_grpc_route),
            ("TLSRoute", parse_tls_route),
        ):
            for ref, p in self._parse_all(kind, parser):
                seen.add(ref)
                if p.parsed.resource is None:
                    self._reject(ref, p.parsed.message())
                else:
                    routes.append(p.parsed.resource)
        grants: list[ReferenceGrant] = []
        for ref, p in self._parse_all("ReferenceGrant", parse_reference_grant):
            seen.add(ref)
            if p.parsed.resource is not None:
                grants.append(p.parsed.resource)
        policies: list[BackendTLSPolicy] = []
        for ref, p in self._parse_all("BackendTLSPolicy", parse_backend_tls_policy):
            seen.add(ref)
            if p.parsed.resource is None:
                self._reject(ref, p.parsed.message())
            else:
                policies.append(p.parsed.resource)
        for gone in [r for r in self._parsed if r not in seen]:
            del self._parsed[gone]
            self._d.class_checked(gone, None, True)  # deleted: nothing to say
            self._rejected.pop(gone, None)
            self._left_out.pop(gone, None)

        reads = Reads(self._d.cache)

        def secret(namespace: str, name: str) -> str | None:
            state = reads.secret(namespace, name)
            return None if state.cert_id else (state.error or "unusable")

        def namespace_labels(name: str) -> Mapping[str, str] | None:
            obj = store.get("Namespace", "", name)
            if obj is None:
                return None
            labels = (obj.get("metadata") or {}).get("labels") or {}
            return {str(k): str(v) for k, v in labels.items()}

        def service_exists(namespace: str, name: str) -> bool:
            return store.get("Service", namespace, name) is not None

        merged = merge(gateways, sets, namespace_labels)
        gateways = merged.gateways  # with their ListenerSets' listeners, served alike
        outcomes = self._addresses(gateways)
        gc = reads.global_configuration() if self._ports is not None else None
        gc_ports = {
            lst.port: lst.name for lst in (gc.listeners if gc else ()) if lst.protocol != "UDP"
        }
        self._port_rules.update(gateways, outcomes, gc_ports)
        config_map = lambda namespace, name: store.get("ConfigMap", namespace, name)  # noqa: E731
        front = frontend_tls.resolve(gateways, grants, config_map)
        att = attach(
            gateways, routes, grants, secret, namespace_labels, service_exists,
            self._port_rules.unavailable, tls_passthrough=self._stream, h2c=self._h2c,
            frontend=front.problem, listener_sets=merged.parents,
        )  # fmt: skip
        set_statuses, attached = split(merged, att.gateways, partial(
            listener_status, grants=grants, secret=secret, port_problem=None,
            tls_passthrough=self._stream, h2c=self._h2c,
        ))  # fmt: skip
        service = lambda namespace, name: store.get("Service", namespace, name)  # noqa: E731
        mark_h2c(att.table, service)
        pair = backend_tls.pair_reader(reads)
        client = client_certificates(gateways, grants, pair)
        tls = backend_tls.apply_backend_tls(att.table, policies, service, config_map,
                                settings.gateway.controller_name, client.pairs)  # fmt: skip
        wanted.update({ObjectRef("BackendTLSPolicy", *k): v for k, v in tls.items()})
        out = serving(
            gateways, outcomes, att, self._status_addresses,
            lambda namespace, name: reads.secret(namespace, name).cert_id, front.value, pair,
        )  # fmt: skip
        backend_tls.with_resolved_refs(out.statuses, gateways, client.resolved)
        frontend_tls.with_insecure_mode(out.statuses, gateways)
        listener_sets.publish(merged, set_statuses, attached, out.statuses)
        wanted.update(out.statuses)
        self._d.declare(ObjectRef("Gateway", "", "*"), reads.refs)
        refused = self._still_refused()
        fitted = fit_routes(without(out.served, set(refused)), settings.nginx.max_record_bytes)
        too_large = fitted.why | refused
        self._served = fitted.served
        self._write_records(fitted.served, fitted.records, out.passing, fitted.fast)
        hop = self._h2c_hop
        self._files[GATEWAY_LISTENS_FILE] = render_listens(out.sockets, ipv6=self._ipv6, hop=hop)
        if self._stream:
            self._files[PASSTHROUGH_FILE] = render_passthrough(
                ((s.address, s.listener.port, s.terminates) for s in out.passing),
                ipv6=self._ipv6,
            ) + (render_hops(out.sockets, ipv6=self._ipv6) if hop else "")
        if self._ports is not None:
            if changed := self._ports.set_gateway_ports(out.held, out.asked):
                self._renders.render_all(changed)
            self._ports.tell_gateway_ports(out.held)
        controller = settings.gateway.controller_name
        for route in routes:
            ref = ObjectRef(route.kind, route.meta.namespace, route.meta.name)
            parents = att.routes.get((route.meta.namespace, route.meta.name), ())
            why = (
                too_large.get(route_id(route.kind, ref.namespace, ref.name))
                if route.kind != "TLSRoute"
                else None
            )
            if why is not None:
                parents = not_accepted(parents, why)
            self._refuse(ref, why)
            if parents or ref in self._sent:
                wanted[ref] = route_parents(
                    parents, route.meta.namespace, route.meta.generation, controller
                )
        self._wanted = wanted

    def _write_records(
        self,
        served: list[Served],
        wanted: Mapping[str, str],
        passing: list[PassthroughServed],
        fast: Mapping[str, str],
    ) -> None:
        """W, X (``fast``) and K records of HTTP listeners (``wanted``; records/frontend_tls.py),
        S and T records of TLS ones, and the endpoint sets their routes use."""
        d = self._d
        d.write_records(Record.GATEWAY, wanted)
        d.write_records(Record.GATEWAY_FAST, fast)
        d.write_records(Record.GATEWAY_CLIENT, frontend_tls.client_records(served))
        passed, passing_uses = passthrough_records(passing)
        d.write_records(Record.STREAM, passed, prefix="gateway.")
        d.write_records(Record.STREAM_CERTIFICATE, certificate_records(passing), prefix="gateway.")
        certs = {f"{_CERT_PREFIX}{i}": s.cert_id for i, s in enumerate(served) if s.cert_id}
        d.note_certificates(_CERT_PREFIX, certs)
        # Which backends each route uses: their endpoint sets are computed and
        # kept while some route on a served listener uses them.
        uses = backends_used(served, passing_uses)
        for ref in set(self._route_backends) | set(uses):
            backends = frozenset(uses.get(ref, ()))
            if self._route_backends.get(ref) != backends:
                d.endpoints.set_backends(ref, backends)
                if backends:
                    self._route_backends[ref] = backends
                else:
                    self._route_backends.pop(ref, None)

    def _addresses(self, gateways: list[Gateway]) -> dict[tuple[str, str], Outcome]:
        """Each Gateway's address or why it has none (kinds/gateway/records/addresses.py)."""
        asking = [Asking((g.meta.namespace, g.meta.name), g.addresses) for g in gateways]
        self._assigned, outcomes = assign(
            asking,
            self._settings.gateway.addresses,
            self._assigned,
            self._had_address,
            self._status_addresses,
        )
        return outcomes

    def _had_address(self, key: tuple[str, str]) -> str | None:
        obj = self._store.get("Gateway", *key)
        for a in ((obj or {}).get("status") or {}).get("addresses") or []:
            if isinstance(a, Mapping) and isinstance(a.get("value"), str):
                return str(a["value"])
        return None


@dataclass(frozen=True)
class _Parse:
    stamp: object  # Store.stamp of the object parsed
    parsed: Parsed[Any]
    class_name: str  # a Gateway's spec.gatewayClassName, as written
    generation: int


def build(context: Context) -> list[GatewayTranslator]:
    """--enable-gateway-api."""
    c = context
    if not c.settings.gateway.enabled:
        return []
    return [
        GatewayTranslator(
            c.settings,
            c.store,
            c.desired,
            c.renders,
            c.files,
            c.sinks.gateway,
            c.ports,
            stream=c.shape.stream,
            h2c=c.shape.h2c,
            h2c_hop=c.shape.h2c_hop,
        )
    ]
