"""Builds a Controller over a fake data plane (no NGINX, no files but secrets)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ferryman.app.wiring import BUILT_IN
from ferryman.configs.configmap import ConfigMapState
from ferryman.dataplane.fake import FakeDataPlane
from ferryman.dataplane.reloads import ReloadLog
from ferryman.engine.controller import Applied, Controller
from ferryman.engine.queue_keys import QueueKey
from ferryman.engine.secrets import SecretStore
from ferryman.engine.settings import Settings
from ferryman.engine.sink import QueueingSink
from ferryman.engine.store import Store
from ferryman.engine.workqueue import WorkQueue
from ferryman.kinds import REGISTRY
from ferryman.observability.metrics import Metrics
from ferryman.report import RecordingReporter
from ferryman.resources.meta import ObjectRef
from ferryman.translators.context import Shape, Sinks


class _GatesApplied:
    """A flush observer calling ``call`` when the applied gated pods change."""

    def __init__(self, call: Callable[[], None]) -> None:
        self._call = call
        self._gated: frozenset[Any] = frozenset()

    def flushed(self, applied: Applied) -> None:
        if (gated := applied.applied_gated_pods()) != self._gated:
            self._gated = gated
            self._call()


class Kit:
    def __init__(
        self,
        tmp: Path,
        dataplane: FakeDataPlane | None = None,
        on_gates_applied: Callable[[], None] | None = None,
        configmap: ConfigMapState | None = None,
        stream: bool = False,
        **settings: Any,
    ) -> None:
        """``settings``: Settings fields to set (``nginx=NginxSettings(...)``);
        ``configmap``: the --nginx-configmaps keys and what they render; ``stream``:
        nginx.conf has the stream block (TransportServers)."""
        self.store = Store(REGISTRY)
        self.queue: WorkQueue[QueueKey] = WorkQueue()
        self.dataplane = dataplane or FakeDataPlane()
        self.reporter = RecordingReporter()
        self.metrics = Metrics()
        # Ingress status as Kubernetes mode would write it: (ref, addresses) per call.
        self.statuses: list[tuple[ObjectRef, tuple[str, ...]]] = []
        # VirtualServer status as the reporter would write it: (ref, state, reason, message);
        # and a VirtualServerRoute's referencedBy as last written.
        self.resource_statuses: list[tuple[ObjectRef, str, str, str]] = []
        self.referenced_by: dict[ObjectRef, str | None] = {}
        # Gateway API statuses as last published.
        self.gateway_statuses: dict[ObjectRef, Mapping[str, Any]] = {}
        self.gateway_writes = 0
        if self.dataplane.observer is None:
            self.dataplane.observer = ReloadLog(self.metrics)
        self.controller = Controller(
            Settings(state_dir=tmp, **settings),
            self.store,
            self.queue,
            self.dataplane,
            SecretStore(),
            self.reporter,
            self.metrics,
            {"nginx.conf": "bootstrap"},
            BUILT_IN,
            shape=Shape(stream=stream),
            sinks=Sinks(
                ingress=lambda ref, addresses: self.statuses.append((ref, addresses)),
                gateway=self._gateway_status,
            ),
            observers=(_GatesApplied(on_gates_applied),) if on_gates_applied else (),
            resource_status=self._resource_status,
            configmap=configmap,
        )
        self.sink = QueueingSink(self.store, self.queue)

    def _resource_status(
        self, ref: ObjectRef, state: str, reason: str, message: str, by: str | None
    ) -> None:
        self.resource_statuses.append((ref, state, reason, message))
        self.referenced_by[ref] = by

    def _gateway_status(self, ref: ObjectRef, status: Mapping[str, Any]) -> None:
        self.gateway_statuses[ref] = status
        self.gateway_writes += 1

    def add(self, *objs: dict[str, Any]) -> None:
        for o in objs:
            self.sink.upsert(o)

    async def drain(self) -> None:
        await self.controller.drain()

    def reasons(self, name: str) -> list[str]:
        return [r for ref, _, r, _ in self.reporter.events if ref.name == name]

    def messages(self, name: str) -> list[str]:
        return [m for ref, _, _, m in self.reporter.events if ref.name == name]

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float:
        value = self.metrics.registry.get_sample_value(name, labels)
        return float(value or 0.0)


def _service(name: str, *addresses: str, namespace: str = "default") -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"ports": [{"port": 80}]},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{name}-1",
                "namespace": namespace,
                "labels": {"kubernetes.io/service-name": name},
            },
            "addressType": "IPv4",
            "ports": [{"port": 8080}],
            "endpoints": [{"addresses": [a]} for a in addresses],
        },
    ]
