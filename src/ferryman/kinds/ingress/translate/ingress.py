"""Ingress (and the IngressClass that says which are served) -> virtual hosts.

An Ingress's hosts are the ones ``Configuration`` gives it (oldest wins,
across kinds); a host with ``nginx.org/policies`` is routed by Lua (a V record)
and every other by the module. Its Event says which hosts it lost and why, in
NIC's words; its status shows the load-balancer addresses while it serves.

An ingress-nginx canary Ingress claims no host: its paths are written into its
main Ingress's host (``records/canary_host.py``), both reading the host's
canaries by host, so either one's change translates the other again; its own
render only says, in its Event, what it joins.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ferryman.configs.model import CATCH_ALL, BackendKey, VirtualHost
from ferryman.configs.routes import encode_host
from ferryman.engine.configuration import covering_wildcard
from ferryman.engine.queue_keys import QueueKey
from ferryman.engine.reads import Reads
from ferryman.engine.settings import Settings
from ferryman.engine.store import Store
from ferryman.engine.workqueue import WorkQueue
from ferryman.kinds.ingress.parse.ingress import Ingress, parse_ingress
from ferryman.kinds.ingress.records.canary_host import (
    JoinedPaths,
    canary_event,
    canary_outcome,
    joined_paths,
    rule_hosts,
)
from ferryman.kinds.ingress.records.hosts import Outcome, Written, ingress_records
from ferryman.kinds.ingress.records.mergeable import (
    NO_MASTER,
    denied_minion,
    key_of,
    mergeable_host,
    minion_event,
)
from ferryman.kinds.ingress.records.passthrough import passed_through
from ferryman.kinds.ingress.records.virtual_hosts import (
    WILDCARD,
    secret_names,
    virtual_hosts,
)
from ferryman.kinds.ingress.translate import host_reads
from ferryman.kinds.ingress.translate.host_reads import CANARY_HOST, MERGEABLE_HOST
from ferryman.kinds.ingress.translate.listen import listen_ports
from ferryman.kinds.policy.translate.reads import PolicyReading
from ferryman.observability.metrics import Metrics
from ferryman.report import (
    ADDED_OR_UPDATED,
    ADDED_OR_UPDATED_WITH_WARNING,
    NORMAL,
    REJECTED,
    WARNING,
    IngressStatusSink,
)
from ferryman.resources.ingress_class import (
    SERVED_CONTROLLERS,
    ClassPolicy,
    parse_ingress_class,
    raw_class_name,
)
from ferryman.resources.meta import InvalidResource, ObjectRef, valid_or_none
from ferryman.translators import Translator, internal
from ferryman.translators.context import Context
from ferryman.translators.desired import Desired
from ferryman.translators.listen_ports import ListenPorts
from ferryman.translators.record_fit import Exclusions, Refusals, largest
from ferryman.translators.renders import Renders

log = logging.getLogger("ferryman.controller")


class IngressTranslator(Translator):
    kinds: tuple[str, ...] = ("Ingress", "IngressClass")
    renders: tuple[str, ...] = ("Ingress",)
    rejected_state: str | None = None

    def __init__(
        self,
        settings: Settings,
        store: Store,
        queue: WorkQueue[QueueKey],
        desired: Desired,
        renders: Renders,
        route_defaults: Callable[[], Mapping[str, str]],
        status: IngressStatusSink | None,
        ports: ListenPorts | None = None,
        passthrough: bool = False,
    ) -> None:
        """``passthrough``: the data plane has the tls-passthrough listener
        (--enable-tls-passthrough and the stream module): ssl-passthrough is served."""
        self._settings = settings
        self._passthrough = passthrough
        self._store = store
        self._queue = queue
        self._d = desired
        self._renders = renders
        self._route_defaults = route_defaults  # the ConfigMap's route-level keys
        self._status = status
        self._addresses: tuple[str, ...] = ()
        self._status_shown: set[ObjectRef] = set()
        # nginx.org/listen-ports: the ports opened beyond the default two.
        self._ports = ports if ports is not None else ListenPorts({})
        # Minions masters leave out for --max-record-bytes.
        self._excluded = Exclusions()
        self._refused: Refusals[Ingress] = Refusals(key_of)

    def sync(self, ref: ObjectRef) -> None:
        if ref.kind == "IngressClass":
            self._sync_class(ref)
            return
        obj = self._store.get("Ingress", ref.namespace, ref.name)
        self._merged_hosts_changed(ref)
        try:
            ing = self._parse(ref, obj)
            self._merged_hosts_changed(ref, ing)
            affected = self._d.config.upsert(ing) if ing else self._d.config.delete(ref)
        except Exception as e:
            log.exception("sync failed", extra={"fields": {"key": str(ref)}})
            self._renders.reject(ref, internal(e))
            return
        self._renders.render_all(affected)
        if ing is None:
            if obj is None:
                self._status_shown.discard(ref)  # deleted: no status to clear
            else:
                self._publish_status(ref)

    def _merged_hosts_changed(self, ref: ObjectRef, ing: Ingress | None = None) -> None:
        """A master or minion changed (``ing``; else as it was): translate the
        others of its host again (kinds/ingress/records/mergeable.py)."""
        if ing is None:
            self._d.cache.forget(ref)
            old = self._d.config.get(ref)
            ing = old if isinstance(old, Ingress) else None
        if (host := mergeable_host(ing)) is not None:
            self._d.mark_stale(self._d.readers_of(ObjectRef(MERGEABLE_HOST, "", host)) - {ref})
        if ing is not None and ing.canary is not None:
            # A canary: its main (and the other canaries of its hosts) again.
            self._canary_hosts_changed(ref, rule_hosts(ing))

    def _canary_hosts_changed(self, ref: ObjectRef, hosts: Iterable[str]) -> None:
        for host in hosts:
            self._d.mark_stale(self._d.readers_of(ObjectRef(CANARY_HOST, "", host)) - {ref})

    def _served_canaries(self, reads: Reads, host: str) -> list[Ingress]:
        """The canary Ingresses of ``host`` this controller serves."""
        d = self._d
        return [
            c
            for c in host_reads.canaries(reads, host)
            if d.policy.accepts(c.class_name) and d.config.allows(c.meta.namespace, host)
        ]

    def _joined(
        self, ing: Ingress, vhosts: list[VirtualHost], reads: Reads
    ) -> dict[str, JoinedPaths]:
        """Per host of a main Ingress ("" the catch-all) the paths canaries join."""
        out: dict[str, JoinedPaths] = {}
        if ing.canary is not None or ing.mergeable is not None:
            return out
        for vh in vhosts:
            host = "" if vh.host == CATCH_ALL else vh.host
            if paths := joined_paths(ing, host, self._served_canaries(reads, host)):
                out[host] = paths
        return out

    def _report_canary(self, ref: ObjectRef, ing: Ingress, reads: Reads) -> None:
        """A canary's Event: the paths it joins, or why it is not served."""
        d = self._d
        mains: dict[str, Ingress | None] = {}
        canaries: dict[str, list[Ingress]] = {}
        denied = []
        for host in sorted(rule_hosts(ing)):
            if not d.config.allows(ref.namespace, host):
                denied.append(
                    f"host {host or '(any host)'} is not allowed in namespace "
                    f"{ref.namespace} (--allowed-host-suffixes)"
                )
                continue
            owner = d.config.owner(host)
            main = d.config.get(owner) if owner is not None else None
            mains[host] = main if isinstance(main, Ingress) else None
            canaries[host] = self._served_canaries(reads, host)
        served, reasons = canary_outcome(ing, mains, canaries)
        warn, reason, message = canary_event(ing, served, denied + reasons)
        if reason != REJECTED:
            d.serve(ref, ())  # served (its main's host): status shown
        d.event(ref, WARNING if warn else NORMAL, reason, message)

    def _parse(self, ref: ObjectRef, obj: Mapping[str, Any] | None) -> Ingress | None:
        """The Ingress to serve, or None (absent, not ours, or invalid: an Event says why)."""
        if obj is None:
            self._d.class_checked(ref, None, True)  # deleted: nothing to say
            return None
        class_name = raw_class_name(obj)
        self._d.class_checked(ref, class_name, served := self._d.policy.accepts(class_name))
        if not served:
            return None
        try:
            return parse_ingress(obj)
        except InvalidResource as e:
            message = f"{ref.namespace}/{ref.name} was rejected: {e}"
            self._d.event(ref, WARNING, REJECTED, message)
            return None

    def render(self, ref: ObjectRef) -> None:
        """Rewrite the virtual hosts ``ref`` owns; drop those it no longer owns."""
        d = self._d
        claimant = d.config.get(ref)
        assert claimant is None or isinstance(claimant, Ingress)
        ing = claimant
        before = d.forget_served(ref)
        vhosts: list[VirtualHost] = []
        warnings: list[str] = []
        reads = Reads(d.cache)
        written: list[Written] = []
        mergeable = None
        if ing is not None:
            states = {n: reads.secret(ref.namespace, n) for n in secret_names(ing)}
            wildcard = self._settings.tls.wildcard_secret
            if wildcard is not None and any(not t.secret_name for t in ing.tls):
                states[WILDCARD] = reads.secret(*wildcard)
            vhosts, warnings = virtual_hosts(ing, d.config.owned_hosts(ref), states)
            if (host := mergeable_host(ing)) is not None:
                found = host_reads.mergeable(reads, host)
                # Tenant mode: a namespace not allowed the host adds nothing to it.
                mergeable = [
                    m
                    for m in found
                    if d.policy.accepts(m.class_name) and d.config.allows(m.meta.namespace, host)
                ]
            joined = self._joined(ing, vhosts, reads)
            # nginx.org annotations over the ConfigMap's keys (kinds/ingress/records/options.py).
            outcome = self._fitted(ref, ing, vhosts, reads, mergeable, joined)
            written = outcome.written
            warnings += outcome.warnings
        written, more, others = listen_ports(ing, ref, written, reads, self._settings, self._ports)
        warnings += more
        # ssl-passthrough: the owned hosts' S records (records/passthrough.py).
        passed = passed_through(ing, d.config.owned_hosts(ref) if vhosts else (), self._passthrough)
        d.write_streams(ref, passed.records)
        warnings += passed.warnings
        if ing is not None and ing.canary is not None:
            self._report_canary(ref, ing, reads)
        d.declare(ref, reads.refs)
        new_hosts = {vh.host for vh in vhosts}
        d.drop_hosts_of(ref, keep=new_hosts)
        for w in written:
            d.write_host(ref, w.host, w.routing, w.client_check, w.fast)
        if new_hosts:
            d.serve(ref, new_hosts)
        if ing is None or ing.canary is None:
            # A main's hosts: their canaries say again whether they are served.
            hosts = before | new_hosts
            self._canary_hosts_changed(ref, {"" if h == CATCH_ALL else h for h in hosts})
        backends: set[BackendKey] = set(passed.backends)
        for w in written:
            backends |= w.backends
        d.endpoints.set_backends(ref, frozenset(backends))
        if ing is None:
            self._refused.forget(ref)
            self._renders.render_all(self._excluded.set(ref, {}))
        minion = ing if ing is not None and ing.mergeable == "minion" else None
        if minion is not None and (why := denied_minion(minion, d.config)) is not None:
            d.event(ref, WARNING, REJECTED, f"{ref.namespace}/{ref.name} was rejected: {why}")
        elif minion is not None:
            warn, reason, message = minion_event(minion, mergeable or [], warnings)
            if (why := self._excluded.why(ref)) is not None:
                warn, reason, message = (
                    True,
                    REJECTED,
                    f"{ref.namespace}/{ref.name} was rejected: {why}",
                )
            d.event(ref, WARNING if warn else NORMAL, reason, message)
            if reason not in (NO_MASTER, REJECTED):
                d.serve(ref, ())  # served (its master's host): status shown
        elif ing is not None and ing.canary is None:
            self._report(ref, bool(vhosts), warnings)
        # Ingresses whose ports changed scheme hands (kinds/ingress/records/ports.py).
        self._renders.render_all(others)

    def _fitted(
        self,
        ref: ObjectRef,
        ing: Ingress,
        vhosts: list[VirtualHost],
        reads: Reads,
        mergeable: list[Ingress] | None,
        joined: dict[str, JoinedPaths],
    ) -> Outcome:
        """``ing``'s records; a master's without the minions whose paths would
        make its host's record too large (configs/record_shares.py)."""

        def render(minions: Sequence[Ingress]) -> Outcome:
            merged = others + list(minions) if mergeable is not None else None
            return ingress_records(
                ing,
                vhosts,
                PolicyReading(reads),
                self._d.policy.served,
                self._route_defaults(),
                mergeable=merged,
                canaries=joined,
            )

        others = [m for m in mergeable or [] if m.mergeable != "minion"]
        minions = [m for m in mergeable or [] if m.mergeable == "minion"]
        if ing.mergeable != "master" or not vhosts:
            self._refused.forget(ref)
            self._renders.render_all(self._excluded.set(ref, {}))
            return render(minions)
        out, why = self._refused.fit(
            ref,
            minions,
            render,
            _largest,
            self._settings.nginx.max_record_bytes,
            "its paths",
            vhosts[0].host,
        )
        excluded = {ObjectRef("Ingress", *name.split("/", 1)): w for name, w in why.items()}
        self._renders.render_all(self._excluded.set(ref, excluded))
        return out

    def shed(self, ref: ObjectRef, why: str) -> bool:
        """NGINX's memory refused ``ref``'s host record (``why``): a master leaves
        out its minion with the largest share instead of being rejected (True),
        until that minion changes; False when there is none to leave out."""
        ing = self._d.config.get(ref)
        if not isinstance(ing, Ingress) or ing.mergeable != "master":
            return False
        self._refused.shrink(ref, why)
        self._renders.render_all([ref])
        return self._refused.shed

    def _report(self, ref: ObjectRef, serving: bool, warnings: list[str]) -> None:
        config = self._d.config
        taken = [
            f"host {h or '(any host)'} is taken by {o.namespace}/{o.name}"
            for h, o in sorted(config.lost_hosts(ref).items())
        ]
        denied = [
            f"host {h or '(any host)'} is not allowed in namespace {ref.namespace} "
            "(--allowed-host-suffixes)"
            for h in config.denied_hosts(ref)
        ]
        warnings = warnings + [
            f"host {h} under {covering_wildcard(h)} is served by {o.namespace}/{o.name} "
            "(an exact host wins over a wildcard)"
            for h, o in sorted(config.shadowed(ref).items())
        ]
        who = f"{ref.namespace}/{ref.name}"
        if not serving:
            # NIC's words when only ownership is in the way.
            lead = "No host can be served" if denied else "All hosts are taken by other resources"
            self._d.event(ref, WARNING, REJECTED, f"{lead}: {'; '.join(taken + denied)}")
        elif taken or denied or warnings:
            self._d.event(
                ref,
                WARNING,
                ADDED_OR_UPDATED_WITH_WARNING,
                f"Configuration for {who} was added or updated with warning(s): "
                + "; ".join(taken + denied + warnings),
            )
        else:
            message = f"Configuration for {who} was added or updated"
            self._d.event(ref, NORMAL, ADDED_OR_UPDATED, message)

    def _sync_class(self, ref: ObjectRef) -> None:
        if ref.name != self._settings.ingress_class:
            return
        cls = valid_or_none(parse_ingress_class, self._store.get("IngressClass", "", ref.name))
        if cls is not None and cls.controller not in SERVED_CONTROLLERS:
            log.warning(
                "IngressClass names another controller; serving only Ingresses that name it",
                extra={"fields": {"class": cls.name, "controller": cls.controller}},
            )
            cls = None
        policy = ClassPolicy(self._settings.ingress_class, cls)
        if policy != self._d.policy:
            self._d.set_policy(policy)
            for ing_ref in self._store.refs("Ingress"):
                self._queue.add(ing_ref)

    # ---- status: the load-balancer addresses ---------------------------------------

    def set_addresses(self, addresses: tuple[str, ...]) -> None:
        """The addresses Ingress status shows; every served Ingress is updated."""
        if addresses != self._addresses:
            self._addresses = addresses
            for ref in self._d.config.refs():
                self._publish_status(ref)

    def _publish_status(self, ref: ObjectRef) -> None:
        if self._status is None or ref.kind != "Ingress":
            return
        if self._d.is_served(ref):
            self._status(ref, self._addresses)
            self._status_shown.add(ref)
        elif ref in self._status_shown:  # rejected, deleted or no longer ours: clear
            self._status(ref, ())
            self._status_shown.discard(ref)

    def withdraw(self, ref: ObjectRef) -> None:
        self._refused.forget(ref)
        self._d.write_streams(ref, {})  # its ssl-passthrough hosts' S records
        self._renders.render_all(self._ports.release(ref) | self._excluded.set(ref, {}))

    def reported(self, ref: ObjectRef, reason: str, message: str) -> None:
        self._publish_status(ref)

    def waiting(self, refs: set[ObjectRef]) -> set[ObjectRef]:
        return set()

    def gauges(self, metrics: Metrics) -> None:
        tally = self._d.config.tally("Ingress")
        for kind in ("regular", "master", "minion"):
            metrics.ingress_resources.labels(type=kind).set(tally.get(MERGEABLE_TYPE[kind], 0))


# The gauge's type label -> the variety (mergeable type) Configuration.tally counts by.
MERGEABLE_TYPE = {"regular": "", "master": "master", "minion": "minion"}


def _largest(outcome: Outcome) -> int:
    return largest(
        v for w in outcome.written for v in (encode_host(w.host), w.routing, w.fast, w.client_check)
    )


def build(context: Context) -> IngressTranslator:
    c = context
    return IngressTranslator(
        c.settings, c.store, c.queue, c.desired, c.renders, c.route_defaults, c.sinks.ingress,
        ports=c.ports, passthrough=bool(c.shape.tls_socket),
    )  # fmt: skip
