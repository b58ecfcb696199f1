"""Kubernetes mode's parts: the API client, informers, reporter, leader election,
with readiness gates the gate keeper and the webhook, and with machine
lifecycle hooks the drain agent and hook keeper; both features publish each
replica's state in one Lease per replica (``kube/leases.py``).

What only Kubernetes mode uses (lightkube and what is built on it) is imported
here where it is used, so that manifests mode never loads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ferryman.app.lifecycle import REPLICA_REPORT
from ferryman.engine.controller import Applied, Controller
from ferryman.engine.endpoint_sets import PodId
from ferryman.engine.kind_spec import KindSpec, enabled
from ferryman.engine.queue_keys import QueueKey
from ferryman.engine.settings import Settings, SettingsError
from ferryman.engine.sink import QueueingSink
from ferryman.engine.store import Store
from ferryman.engine.workqueue import WorkQueue
from ferryman.observability.metrics import Metrics
from ferryman.resources.meta import ObjectRef

if TYPE_CHECKING:
    from ferryman.dataplane.in_flight import InFlight
    from ferryman.drains.decide import Flavour
    from ferryman.drains.replica import DrainAgent
    from ferryman.engine.following import Following
    from ferryman.gates.decide import PodKey
    from ferryman.gates.keeper import GateKeeper
    from ferryman.gates.pods import PendingIndex
    from ferryman.gates.report import ReplicaLease
    from ferryman.webhook.server import WebhookServer


# The task publishing this replica's report Lease: app stops it after NGINX.


class KubernetesMode:
    """Kubernetes mode's parts: API client, informers, reporter, leader election."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        queue: WorkQueue[QueueKey],
        metrics: Metrics,
        kinds: Iterable[KindSpec],
    ) -> None:
        """``kinds``: the registered kinds (watched when enabled, reported on)."""
        kinds = tuple(kinds)
        from ferryman.kube.client import KubeconfigError, make_client
        from ferryman.kube.leader import LeaderElector
        from ferryman.report.kubernetes import KubernetesReporter, instance_name
        from ferryman.sources.kubernetes import KubernetesSource

        self.settings = settings
        self.store = store
        self.metrics = metrics
        self.gates: GateKeeper | None = None
        self.drains: DrainAgent | None = None
        # What the gate flipper and the drain agent were last told was applied.
        self._gated: frozenset[PodId] = frozenset()
        self._leaving: frozenset[str] = frozenset()
        # The ConfigMap's external-status-address last seen, and the wake-up of
        # the status addresses' task when a flush changed it.
        self._status_override: tuple[str, ...] | None = None
        self._status_changed = asyncio.Event()
        self._status_of: Callable[[], tuple[str, ...] | None] = lambda: None
        self.lease: ReplicaLease | None = None
        self.pending: PendingIndex | None = None
        if settings.gates.enabled:
            from ferryman.gates.pods import PendingIndex

            self.pending = PendingIndex(settings.ingress_class)
        try:
            self.client = make_client(settings.kubernetes.kubeconfig)
        except KubeconfigError as e:
            raise SettingsError(str(e)) from e
        self.source = KubernetesSource(
            self.client,
            QueueingSink(store, queue, self.pending),
            settings.kubernetes.watch_namespaces,
            make_client(settings.kubernetes.kubeconfig, many_watches=True)
            if settings.gates.enabled
            else None,
            settings.ingress_class,
            [c for c in (settings.nginx.configmap, settings.nginx.ingress_nginx_configmap) if c],
            enabled(kinds, settings),
        )
        self.reporter = KubernetesReporter(
            self.client, store.uid, settings.gateway.controller_name, store.get, kinds
        )
        self.elector = LeaderElector(
            self.client,
            settings.leader_election.lock_namespace,
            settings.leader_election.lock_name,
            instance_name(),
            self.reporter.set_leader,
            settings.leader_election.lease_duration,
            settings.leader_election.renew_deadline,
            settings.leader_election.retry_period,
        )

    def tasks(
        self,
        stop: asyncio.Event,
        controller: Controller,
        in_flight: Callable[[], Awaitable[InFlight]],
    ) -> list[asyncio.Task[Any]]:
        """``in_flight``: the data plane's requests in flight (machine drains)."""
        from ferryman.gates.report import ReplicaLease, lease_name
        from ferryman.report.kubernetes import instance_name

        self.reporter.defer_to(controller.idle)
        tasks = [
            asyncio.create_task(self.reporter.run(), name="reporter"),
            asyncio.create_task(self._addresses(controller), name="addresses"),
        ]
        if self.settings.leader_election.enabled:
            tasks.append(asyncio.create_task(self.elector.run(), name="leader-election"))
        else:
            self.reporter.set_leader(True)
        settings = self.settings
        if settings.kubernetes.cert_manager:
            from ferryman.certificates.writer import CertificateWriter

            writer = CertificateWriter(
                self.client,
                controller.certificates_asked,
                lambda: self.elector.leader or not settings.leader_election.enabled,
                self.reporter,
                settings.kubernetes.watch_namespaces,
            )
            tasks.append(asyncio.create_task(writer.run(), name="certificates"))
            writer.kick()
        hooks = settings.drain.machine_hooks
        if not settings.gates.enabled and hooks == "off":
            return tasks
        identity = instance_name()
        # A report lasts as long as the leader's Lease: a replica that stops
        # renewing holds gates and drains back no longer than a dead leader
        # holds status.
        self.lease = lease = ReplicaLease(
            self.client,
            settings.leader_election.lock_namespace,
            lease_name(settings.leader_election.lock_name, identity),
            identity,
            settings.ingress_class,
            controller.applied_gated_pods if settings.gates.enabled else frozenset,
            settings.leader_election.lease_duration,
            (lambda: self.drains.annotations() if self.drains else {}),
        )
        tasks.append(asyncio.create_task(lease.run(), name=REPLICA_REPORT))
        if settings.gates.enabled:
            self.gates = self._gate_keeper(controller, lease)
            tasks += self.gates.tasks()
        if hooks != "off":
            tasks += self._drains(controller, lease, identity, in_flight)
        return tasks

    def _drains(
        self,
        controller: Controller,
        lease: ReplicaLease,
        identity: str,
        in_flight: Callable[[], Awaitable[InFlight]],
    ) -> list[asyncio.Task[Any]]:
        from ferryman.drains.keeper import HookKeeper
        from ferryman.drains.replica import DrainAgent

        settings = self.settings
        flavour: Flavour = (
            "openshift" if settings.drain.machine_hooks == "openshift" else "cluster-api"
        )
        self.drains = agent = DrainAgent(
            self.client,
            flavour,
            identity,
            settings.drain.node_name,
            controller,
            in_flight,
            lease.changed,
        )
        keeper = HookKeeper(
            self.client,
            agent,
            identity,
            settings.leader_election.lock_namespace,
            settings.ingress_class,
            controller.nodes_in_use,
            lambda: self.elector.leader or not settings.leader_election.enabled,
            settings.drain.machine_timeout,
            self.metrics,
            lease.duration,
            settings.drain.in_flight_timeout,
        )
        return [
            asyncio.create_task(agent.run(), name="machine-drains"),
            asyncio.create_task(keeper.run(), name="machine-hooks"),
        ]

    def following(self, controller: Controller) -> Following:
        """Ready means caught up: after a stall or an API outage longer than the
        report Lease allows, not ready until relisted and applied (following.py)."""
        from ferryman.engine.following import Following

        async def caught_up() -> None:
            await self.source.wait_synced()
            # The lists' changes are queued by now; NGINX confirms them in a
            # flush. Polled: settled() is derived from the queue, the render and
            # the push, and is asked only while catching up.
            while not controller.settled():  # noqa: ASYNC110
                await asyncio.sleep(0.05)

        return Following(
            self.settings.leader_election.lease_duration,
            self.source.resync,
            caught_up,
            (
                ("lists from the API server", self.source.out_of_touch),
                ("pushes to NGINX", controller.push_failing_since),
            ),
        )

    def node_leaving(self) -> bool:
        """This replica's Node is being drained: readiness answers 503."""
        return self.drains is not None and self.drains.node_leaving()

    def flushed(self, applied: Applied) -> None:
        """A flush observer (``Controller``): the gate flipper and the drain
        agent hear when this replica's data plane moved on."""
        if self.gates is not None and (gated := applied.applied_gated_pods()) != self._gated:
            self._gated = gated
            self.gates.applied_changed()
        if self.drains is not None and (leaving := applied.leaving_applied()) != self._leaving:
            self._leaving = leaving
            self.drains.applied_changed()
        self.source.settled(applied.gate_routed_namespaces())
        if self._status_of() != self._status_override:
            self._status_changed.set()

    def _gate_keeper(self, controller: Controller, lease: ReplicaLease) -> GateKeeper:
        from ferryman.gates.keeper import GateKeeper
        from ferryman.gates.pods import PendingPods
        from ferryman.report.kubernetes import instance_name

        store, index = self.store, self.pending
        assert index is not None  # built with --readiness-gates
        pending = PendingPods(
            self.settings.ingress_class,
            lambda: [
                p for namespace, name in index.names() if (p := store.get("Pod", namespace, name))
            ],
            lambda namespace, name: store.get("Service", namespace, name),
            controller.served_services,
        )

        def warn(pod: PodKey, message: str) -> None:
            ref = ObjectRef("Pod", pod.namespace, pod.name)
            self.reporter.event(ref, "Warning", "ReadinessGateTimedOut", message)

        return GateKeeper(
            self.client,
            self.settings,
            instance_name(),
            lease,
            pending,
            lambda: self.elector.leader or not self.settings.leader_election.enabled,
            warn,
            self.metrics,
        )

    async def _addresses(self, controller: Controller) -> None:
        """Keep the status addresses current: the ConfigMap's
        ``external-status-address`` when set (NIC: it overrides the flags), else
        ``--external-service``'s (read every 10 s: it can change), else
        ``--ingress-address``'s."""
        from ferryman.report.kubernetes import external_addresses

        self._status_of = controller.status_addresses
        last: tuple[tuple[str, ...], str] | None = None
        while True:
            self._status_changed.clear()
            self._status_override = override = controller.status_addresses()
            # NIC: ports come from the external Service only.
            addresses, ports = self.settings.kubernetes.ingress_addresses, ""
            if override is not None:
                addresses = override
            elif self.settings.kubernetes.external_service:
                addresses, ports = await external_addresses(
                    self.client, self.settings.kubernetes.external_service
                )
            if (addresses, ports) != last:
                last = (addresses, ports)
                controller.set_addresses(addresses)
                self.reporter.set_external_endpoints(addresses, ports)
            polling = override is None and bool(self.settings.kubernetes.external_service)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._status_changed.wait(), 10 if polling else None)


def webhook(
    settings: Settings,
    cluster: KubernetesMode,
    store: Store,
    controller: Controller,
    metrics: Metrics,
    bound: Sequence[socket.socket] = (),
) -> WebhookServer:
    """The readiness gate webhook, reading the served Services from the cache
    (``bound``: its port's sockets, bound early; none: bound when it starts)."""
    from ferryman.webhook.admission import CachedServices, Injector
    from ferryman.webhook.cluster import CertificateSecret
    from ferryman.webhook.server import WebhookServer

    assert settings.gates.webhook_cert_secret is not None
    namespace, name = settings.gates.webhook_cert_secret
    client = cluster.client
    return WebhookServer(
        bound or settings.gates.webhook_port,
        Injector(
            settings.ingress_class,
            CachedServices(controller.served_services, store.get, store.stamp),
            # Whatever the configuration's namespaceSelector says, as the watch of
            # the opted-in Namespaces (on with the webhook) knows them.
            cluster.source.opted_in,
        ),
        client,
        CertificateSecret(client, namespace, name, settings.gates.webhook_cert_hosts),
        settings.gates.webhook_configuration,
        lambda result: metrics.readiness_gate_reviews.labels(result=result).inc(),
    )
