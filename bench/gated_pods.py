"""What readiness gates cost the controller: syncing a Service whose pods all
wait on ferryman's gate, and the store's memory per watched pod.

    .venv/bin/python -m bench.gated_pods [--pods 1000]

One Service with ``--pods`` not-ready endpoints, each pod Ready in all but
ferryman's gate, over a data plane that only acknowledges (no NGINX): the time
for all pods turning ContainersReady in one batch, for one pod's change alone,
and, for comparison, one endpoint's change in the same slice with gates off.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from ferryman.app.wiring import BUILT_IN
from ferryman.dataplane.fake import FakeDataPlane
from ferryman.engine.controller import Controller
from ferryman.engine.queue_keys import QueueKey
from ferryman.engine.secrets import SecretStore
from ferryman.engine.settings import ReadinessGateSettings, Settings
from ferryman.engine.store import Store
from ferryman.engine.workqueue import WorkQueue
from ferryman.kinds import REGISTRY
from ferryman.observability.metrics import Metrics
from ferryman.report import RecordingReporter
from ferryman.resources.readiness_gate import INJECT_ENABLED, INJECT_LABEL, gate_type

NS = "bench"


def _pod(i: int, ip: str, containers_ready: bool) -> dict[str, Any]:
    """A pod as the API server sends it, with the conditions a kubelet writes."""
    ready = "True" if containers_ready else "False"
    conditions = [("PodScheduled", "True"), ("Initialized", "True"), ("ContainersReady", ready)]
    conditions += [("Ready", "False")]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"web-7d4b9c8f6-{i:05d}",
            "namespace": NS,
            "uid": f"6f1c2e7a-3b1d-4c5e-9f0a-{i:012d}",
            "resourceVersion": str(1000 + i),
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": "web", "pod-template-hash": "7d4b9c8f6"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "web-7d4b9c8f6", "uid": "x"}],
        },
        "spec": {
            "containers": [{"name": "web", "image": "web:1", "ports": [{"containerPort": 8080}]}],
            "readinessGates": [{"conditionType": gate_type("ferryman")}],
        },
        "status": {
            "phase": "Running",
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "conditions": [
                {"type": t, "status": s, "lastTransitionTime": "2026-01-01T00:00:00Z"}
                for t, s in conditions
            ],
            "containerStatuses": [{"name": "web", "ready": containers_ready, "restartCount": 0}],
        },
    }


def _objects(ips: list[str], ready: bool) -> list[dict[str, Any]]:
    condition = {"ready": ready, "serving": ready, "terminating": False}
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": NS, "labels": {INJECT_LABEL: INJECT_ENABLED}},
        },
        {
            "kind": "Service",
            "metadata": {"name": "web", "namespace": NS},
            "spec": {"ports": [{"port": 80}], "selector": {"app": "web"}},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": "web-1",
                "namespace": NS,
                "labels": {"kubernetes.io/service-name": "web"},
            },
            "addressType": "IPv4",
            "ports": [{"port": 8080}],
            "endpoints": [{"addresses": [ip], "conditions": dict(condition)} for ip in ips],
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": {"name": "web", "namespace": NS},
            "spec": {
                "ingressClassName": "ferryman",
                "rules": [
                    {
                        "host": "web.test",
                        "http": {
                            "paths": [
                                {
                                    "path": "/",
                                    "pathType": "Prefix",
                                    "backend": {"service": {"name": "web", "port": {"number": 80}}},
                                }
                            ]
                        },
                    }
                ],
            },
        },
    ]


class _Bench:
    def __init__(self, gates: bool) -> None:
        self.store = Store(REGISTRY)
        self.queue: WorkQueue[QueueKey] = WorkQueue()
        self.controller = Controller(
            Settings(
                state_dir=Path(tempfile.mkdtemp()), gates=ReadinessGateSettings(enabled=gates)
            ),
            self.store,
            self.queue,
            FakeDataPlane(),
            SecretStore(),
            RecordingReporter(),
            Metrics(),
            {"nginx.conf": "bootstrap"},
            BUILT_IN,
        )

    def sync(self, *objs: dict[str, Any]) -> float:
        from ferryman.engine.queue_keys import keys_for_event

        started = time.perf_counter()
        for o in objs:
            for key in keys_for_event(o, self.store.upsert(o)):
                self.queue.add(key)
        asyncio.run(self.controller.drain())
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=1000)
    args = parser.parse_args()
    n = args.pods
    ips = [f"10.1.{i // 250}.{i % 250 + 1}" for i in range(n)]

    gated = _Bench(gates=True)
    gated.sync(*_objects(ips, ready=False), *[_pod(i, ip, False) for i, ip in enumerate(ips)])
    batch = gated.sync(*[_pod(i, ip, True) for i, ip in enumerate(ips)])
    peers = len(gated.controller.applied_gated_pods())
    one = [gated.sync(_pod(i, ips[i], i % 2 == 1)) for i in range(50)]

    plain = _Bench(gates=False)
    objs = _objects(ips, ready=True)
    plain.sync(*objs)
    slices = []
    for i in range(50):
        changed = copy.deepcopy(objs[2])
        changed["endpoints"][i]["conditions"]["ready"] = False
        slices.append(plain.sync(changed))

    tracemalloc.start()
    store = Store(REGISTRY)
    for i, ip in enumerate(ips):
        store.upsert(_pod(i, ip, True))
    per_pod = tracemalloc.get_traced_memory()[0] / n
    tracemalloc.stop()

    print(f"pods: {n} (gated peers confirmed: {peers})")
    print(f"all pods ContainersReady in one batch: {batch * 1000:.0f} ms")
    print(f"one pod's change alone: {sorted(one)[len(one) // 2] * 1000:.1f} ms (median)")
    print(f"gates off, one endpoint's change: {sorted(slices)[len(slices) // 2] * 1000:.1f} ms")
    print(f"store bytes per watched pod: {per_pod:.0f}")


if __name__ == "__main__":
    main()
