"""NIC's VirtualServer, the VirtualServerRoutes it delegates to and the Policies
they attach -> a virtual host's records, with NIC's status and Events.

A VirtualServer owns its host through ``Configuration`` like an Ingress (oldest
wins, across kinds); its routes become a V record (Lua) and, for the routes the
module serves exactly, an F record. A VirtualServerRoute or Policy change
translates again exactly the VirtualServers that read it (``Desired.deps``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ferryman.certificates.decide import Wanted
from ferryman.configs.routes import encode_host
from ferryman.engine.reads import Reads
from ferryman.engine.settings import Settings
from ferryman.engine.store import Store
from ferryman.kinds.policy.records.status import policy_status
from ferryman.kinds.policy.translate.reads import PolicyReading
from ferryman.kinds.virtualserver.parse.virtualserver import VirtualServer, parse_virtual_server
from ferryman.kinds.virtualserver.records.delegation import Delegated, resolve
from ferryman.kinds.virtualserver.records.listeners import resolve_listeners
from ferryman.kinds.virtualserver.records.virtualserver import VSRecords, vs_records
from ferryman.kinds.virtualserver.translate.route_reads import RoutesRead
from ferryman.kinds.virtualserver.translate.vsr_status import RouteStatuses
from ferryman.observability.metrics import Metrics
from ferryman.report import (
    ADDED_OR_UPDATED,
    ADDED_OR_UPDATED_WITH_WARNING,
    INVALID,
    NORMAL,
    REJECTED,
    VALID,
    WARNING,
    WARNING_STATE,
)
from ferryman.resources.meta import ObjectRef
from ferryman.translators import Translator
from ferryman.translators.context import Context
from ferryman.translators.desired import Desired
from ferryman.translators.record_fit import Refusals, largest
from ferryman.translators.renders import Renders


class VirtualServerTranslator(Translator):
    kinds: tuple[str, ...] = ("VirtualServer", "VirtualServerRoute", "Policy")
    renders: tuple[str, ...] = ("VirtualServer",)
    rejected_state: str | None = INVALID

    def __init__(
        self,
        settings: Settings,
        store: Store,
        desired: Desired,
        renders: Renders,
        route_defaults: Callable[[], Mapping[str, str]],
    ) -> None:
        """``route_defaults``: the ConfigMap's route-level keys in force."""
        self._settings = settings
        self._store = store
        self._d = desired
        self._renders = renders
        self._route_defaults = route_defaults
        self._routes = RouteStatuses(
            desired.cache,
            lambda: desired.policy.served,
            desired.writer_of,
            self._route_status,
            desired.config.allows,
        )
        # VirtualServerRoutes left out because NGINX's memory refused the host.
        self._refused: Refusals[Delegated] = Refusals(_name)
        # Each Policy's spec when it was last reported (its own status and Event).
        self._policy_specs: dict[ObjectRef, object] = {}

    def sync(self, ref: ObjectRef) -> None:
        if ref.kind == "VirtualServer":
            self._sync_virtual_server(ref)
        elif ref.kind == "VirtualServerRoute":
            self._class_checked(ref)
            self._d.referenced_changed(ref)
            self._routes.changed(ref)
        else:
            self._class_checked(ref)
            if self._policy_changed(ref):
                self._d.referenced_changed(ref)

    def _class_checked(self, ref: ObjectRef) -> None:
        """A VirtualServerRoute or Policy of another class is said once too
        (neither is used: NIC's rule, "" or the class served)."""
        obj = self._store.get(ref.kind, ref.namespace, ref.name)
        named = _vs_class(obj) if obj is not None else ""
        self._d.class_checked(ref, named, obj is None or named in ("", self._d.policy.served))

    def _sync_virtual_server(self, ref: ObjectRef) -> None:
        obj = self._store.get("VirtualServer", ref.namespace, ref.name)
        vs = None
        # NIC serves a VirtualServer without a class whatever the default class is.
        named = _vs_class(obj) if obj is not None else ""
        served = named in ("", self._d.policy.served)
        self._d.class_checked(ref, named, obj is None or served)  # deleted: nothing to say
        if obj is not None and served:
            parsed = parse_virtual_server(obj, cert_manager=self._settings.kubernetes.cert_manager)
            vs = parsed.resource
            error = parsed.message()
            if vs is None:
                who = f"{ref.namespace}/{ref.name}"
                message = f"VirtualServer {who} was rejected with error: {error}"
                self._event(ref, INVALID, REJECTED, message)
        self._d.certificates.set(ref, *asked_of(vs))
        old = self._d.config.get(ref)
        if vs is not None and isinstance(old, VirtualServer) and _same(old, vs):
            return  # only its status or resourceVersion moved
        affected = self._d.config.upsert(vs) if vs else self._d.config.delete(ref)
        self._renders.render_all(affected)

    def _policy_changed(self, ref: ObjectRef) -> bool:
        """Report a changed Policy's own status and Event (NIC's syncPolicy); False
        when its spec is as it was (its status write comes back as a change)."""
        obj = self._store.get("Policy", ref.namespace, ref.name)
        spec = obj.get("spec") if obj is not None else None
        if ref in self._policy_specs and self._policy_specs[ref] == spec:
            return False
        if obj is None:
            self._policy_specs.pop(ref, None)
            return True
        self._policy_specs[ref] = spec
        if (status := policy_status(obj, self._d.policy.served)) is not None:
            self._event(ref, status.state, status.reason, status.message)
        return True

    def _event(self, ref: ObjectRef, state: str, reason: str, message: str) -> None:
        self._d.event(ref, NORMAL if state == VALID else WARNING, reason, message, state)

    def _route_status(
        self, ref: ObjectRef, state: str, reason: str, message: str, referenced_by: str
    ) -> None:
        self._event(ref, state, reason, message)
        self._d.referenced(ref, referenced_by)

    def render(self, ref: ObjectRef) -> None:
        d = self._d
        res = d.config.get(ref)
        vs = res if isinstance(res, VirtualServer) else None
        d.forget_served(ref)
        owned = d.config.owned_hosts(ref) if vs is not None else ()
        secret = vs.tls.secret if vs is not None and vs.tls and vs.tls.secret else None
        reads = Reads(d.cache)
        state = reads.secret(ref.namespace, secret) if secret else None
        wildcard = self._settings.tls.wildcard_secret
        if vs is not None and vs.tls and not secret and wildcard is not None:
            # NIC: a tls block naming no Secret terminates TLS with --wildcard-tls-secret.
            state = reads.secret(*wildcard)
        delegations = (
            resolve(vs, RoutesRead(reads), d.policy.served, d.config) if vs and owned else None
        )
        d.declare(ref, reads.refs)
        d.drop_hosts_of(ref, keep=owned)
        if vs is None or delegations is None:
            self._refused.forget(ref)
        if vs is None:
            d.endpoints.set_backends(ref, frozenset())
            self._routes.served(ref, None, {})
            return
        who = f"{ref.namespace}/{ref.name}"
        if delegations is None:
            d.endpoints.set_backends(ref, frozenset())
            self._routes.served(ref, vs.host, {})
            # NIC's words: the resource is kept, its host is served by another.
            self._event(ref, WARNING_STATE, REJECTED, "Host is taken by another resource")
            return
        http2 = self._route_defaults().get("http2") == "true"

        def render(delegated: Sequence[Delegated]) -> VSRecords:
            return vs_records(
                vs,
                state,
                reads=PolicyReading(reads),
                ingress_class=d.policy.served,
                delegated=tuple(delegated),
                http2=http2,
            )

        # VirtualServerRoutes whose subroutes would make the record too large
        # are left out (configs/record_shares.py), not the VirtualServer.
        out, left_out = self._refused.fit(
            ref,
            delegations.routes,
            render,
            _largest,
            self._settings.nginx.max_record_bytes,
            "its subroutes",
            vs.host,
        )
        host, listener_warnings = out.host, []
        if vs.listener is not None:
            # Served on its GlobalConfiguration listeners only; NIC warns when one
            # does not fit (kinds/virtualserver/records/listeners.py).
            listeners, warning = resolve_listeners(vs.listener, reads.global_configuration())
            host = replace(host, listeners=listeners)
            listener_warnings = [warning] if warning else []
        d.declare(ref, reads.refs)
        d.write_host(ref, host, out.record, out.client_check, out.fast)
        d.serve(ref, {out.host.host})
        d.endpoints.set_backends(ref, out.backends)
        self._routes.served(ref, vs.host, out.routes)
        for name, why in sorted(left_out.items()):
            vsr = ObjectRef("VirtualServerRoute", *name.split("/", 1))
            self._routes.changed(vsr)  # waits for its host, as one served by none
            message = f"VirtualServerRoute {name} was rejected: {why}"
            self._route_status(vsr, INVALID, REJECTED, message, "")
        if warnings := delegations.warnings + out.warnings + tuple(listener_warnings):
            self._event(
                ref,
                WARNING_STATE,
                ADDED_OR_UPDATED_WITH_WARNING,
                f"Configuration for {who} was added or updated with warning(s): "
                + "; ".join(warnings),
            )
        else:
            # NIC's text, its trailing space included.
            message = f"Configuration for {who} was added or updated "
            self._event(ref, VALID, ADDED_OR_UPDATED, message)

    def withdraw(self, ref: ObjectRef) -> None:
        self._refused.forget(ref)
        self._routes.served(ref, None, {})

    def shed(self, ref: ObjectRef, why: str) -> bool:
        """NGINX's memory refused ``ref``'s host records (``why``): the
        VirtualServer leaves out its VirtualServerRoute with the largest share
        instead of being rejected (True), until that one changes; False when
        it delegates to none."""
        self._refused.shrink(ref, why)
        self._renders.render_all([ref])
        return self._refused.shed

    def reported(self, ref: ObjectRef, reason: str, message: str) -> None:
        pass  # the worker publishes status.state (Desired.take_state) itself

    def waiting(self, refs: set[ObjectRef]) -> set[ObjectRef]:
        return self._routes.serving(refs)

    def gauges(self, metrics: Metrics) -> None:
        metrics.virtualserver_resources.set(self._d.config.count("VirtualServer"))
        metrics.virtualserverroute_resources.set(self._routes.count())


def asked_of(vs: VirtualServer | None) -> tuple[tuple[str, str] | None, Wanted | None]:
    """What a VirtualServer served as ``vs`` (None: not served) tells
    cert-manager's writer: its uid and name, and the Certificate its
    ``tls.cert-manager`` asks for."""
    if vs is None:
        return None, None
    cm = vs.tls.cert_manager if vs.tls is not None else None
    if cm is None or vs.tls is None or not vs.tls.secret:
        return (vs.meta.uid, vs.meta.name), None
    labels = tuple(sorted(vs.meta.labels.items()))
    wanted = Wanted(
        vs.meta.namespace, vs.meta.name, vs.meta.uid, labels, vs.host, vs.tls.secret, cm
    )
    return (vs.meta.uid, vs.meta.name), wanted


def _vs_class(obj: Mapping[str, Any]) -> str:
    """The class a raw VirtualServer asks for ("" for none)."""
    spec = obj.get("spec")
    value = spec.get("ingressClassName") if isinstance(spec, Mapping) else None
    return value if isinstance(value, str) else ""


def _same(a: VirtualServer, b: VirtualServer) -> bool:
    """Equal but for resourceVersion (a status write changes only that)."""
    return a == replace(b, meta=replace(b.meta, resource_version=a.meta.resource_version))


def _largest(out: VSRecords) -> int:
    return largest((encode_host(out.host), out.record, out.client_check, out.fast))


def _name(d: Delegated) -> str:
    return f"{d.ref.namespace}/{d.ref.name}"


def build(context: Context) -> VirtualServerTranslator:
    c = context
    return VirtualServerTranslator(c.settings, c.store, c.desired, c.renders, c.route_defaults)
