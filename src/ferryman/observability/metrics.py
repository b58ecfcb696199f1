"""Prometheus collectors under NIC's names (so its dashboards work) and ferryman's own.

Each process owns one registry; nothing is registered globally.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

NIC = "nginx_ingress_controller"
NGINX = "nginx_ingress_nginx"

_STUB = re.compile(
    r"Active connections:\s*(\d+).*?(\d+)\s+(\d+)\s+(\d+)\s*"
    r"Reading:\s*(\d+)\s*Writing:\s*(\d+)\s*Waiting:\s*(\d+)",
    re.S,
)


def parse_stub_status(text: str) -> dict[str, int] | None:
    """stub_status's text as numbers, or None when it is not stub_status."""
    m = _STUB.search(text)
    if m is None:
        return None
    keys = ("active", "accepted", "handled", "requests", "reading", "writing", "waiting")
    return dict(zip(keys, (int(g) for g in m.groups()), strict=True))


class StubStatusCollector(Collector):
    """NGINX's counters under NIC's names (nginx-prometheus-exporter's family).

    NGINX keeps the running totals; the last reading is exported as is, which is
    why these are not prometheus_client Counters (those count up themselves).
    """

    def __init__(self) -> None:
        self.reading: dict[str, int] | None = None

    def collect(self) -> Iterator[Metric]:
        up = Metric(f"{NGINX}_up", "Status of the last metric scrape of NGINX", "gauge")
        up.add_sample(f"{NGINX}_up", {}, 1.0 if self.reading else 0.0)
        yield up
        if not self.reading:
            return
        r = self.reading
        kinds = {"active": "gauge", "reading": "gauge", "writing": "gauge", "waiting": "gauge",
                 "accepted": "counter", "handled": "counter"}  # fmt: skip
        for key, kind in kinds.items():
            name = f"{NGINX}_connections_{key}"
            metric = Metric(name, f"{key.capitalize()} client connections", kind)
            metric.add_sample(name, {}, float(r[key]))
            yield metric
        req = Metric(f"{NGINX}_http_requests", "Total http requests", "counter")
        req.add_sample(f"{NGINX}_http_requests_total", {}, float(r["requests"]))
        yield req
        if "fast_path_proxied" in r:
            # ngx_http_ferryman_module's counts: how much traffic the C fast
            # path proxies, and how much it hands to the Lua slow path.
            name = "ferryman_fast_path_requests"
            fast = Metric(name, "Requests routed by the fast path, by the path that served them",
                          "counter")  # fmt: skip
            fast.add_sample(f"{name}_total", {"path": "fast"}, float(r["fast_path_proxied"]))
            fast.add_sample(f"{name}_total", {"path": "slow"}, float(r["fast_path_handed_over"]))
            yield fast


class _ConstLabels(Collector):
    """Adds NIC's constant labels (``class``) to every sample of a registry."""

    def __init__(self, inner: CollectorRegistry, labels: dict[str, str]) -> None:
        self._inner = inner
        self._labels = labels

    def collect(self) -> Iterator[Metric]:
        for metric in self._inner.collect():
            metric.samples = [
                s._replace(labels={**s.labels, **self._labels}) for s in metric.samples
            ]
            yield metric


class WorkerCounter(Collector):
    """NGINX worker processes by generation, as NIC counts them: workers still
    draining after a reload retitle themselves "is shutting down"."""

    def __init__(self) -> None:
        self.master_pid: Callable[[], int | None] = lambda: None

    def collect(self) -> Iterator[Metric]:
        counts = worker_processes(self.master_pid())
        name = f"{NIC}_nginx_worker_processes_total"
        metric = Metric(name, "Number of NGINX worker processes by generation", "gauge")
        for generation, n in counts.items():
            metric.add_sample(name, {"generation": generation}, float(n))
        yield metric


def worker_processes(master: int | None) -> dict[str, int]:
    """The master's workers: ``current``, and ``old`` ones still draining after a
    reload (NGINX and Angie retitle them "is shutting down")."""
    counts = {"current": 0, "old": 0}
    if master is not None:
        for pid in _children(master):
            try:
                title = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"worker process" in title:
                counts["old" if b"shutting down" in title else "current"] += 1
    return counts


class InFlightCollector(Collector):
    """Requests in flight now (``dataplane/in_flight.py``), read at each scrape:
    only the peers with any are exported, so a peer's series ends when its last
    request does, and none is exported when the data plane cannot count per
    peer (it would read as "drained")."""

    def __init__(self) -> None:
        # (peer -> count, replica's count, whether the peers are measured)
        self.reading: tuple[Mapping[str, int], int, bool] | None = None

    def collect(self) -> Iterator[Metric]:
        if self.reading is None:
            return
        peers, replica, measured = self.reading
        name = "ferryman_requests_in_flight"
        metric = Metric(name, "Requests this replica's NGINX is serving now", "gauge")
        metric.add_sample(name, {}, float(replica))
        yield metric
        name = "ferryman_upstream_server_requests_in_flight"
        metric = Metric(
            name,
            "Requests in flight to an upstream server (a peer) now, counted by the data "
            "plane from peer selection to release; absent where not measured",
            "gauge",
        )
        if measured:
            for server, n in sorted(peers.items()):
                if n:
                    metric.add_sample(name, {"server": server}, float(n))
        yield metric
        name = "ferryman_upstream_server_requests_in_flight_measured"
        metric = Metric(
            name,
            "1 when the data plane counts requests in flight per upstream server now, "
            "0 when it cannot (then no server is known to be drained)",
            "gauge",
        )
        metric.add_sample(name, {}, 1.0 if measured else 0.0)
        yield metric


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return []


class Metrics:
    def __init__(self, ingress_class: str = "ferryman") -> None:
        # NIC exports no *_created series; their absence keeps dashboards identical.
        disable_created_metrics()  # type: ignore[no-untyped-call]  # untyped upstream
        self.registry = CollectorRegistry()
        r = self.registry
        self.reloads = Counter(
            f"{NIC}_nginx_reloads",
            "Number of successful NGINX reloads",
            ["reason"],
            registry=r,
        )
        self.reload_errors = Counter(
            f"{NIC}_nginx_reload_errors", "Number of unsuccessful NGINX reloads", registry=r
        )
        self.last_reload_status = Gauge(
            f"{NIC}_nginx_last_reload_status",
            "Status of the last NGINX reload (1 success, 0 failure)",
            registry=r,
        )
        self.last_reload_ms = Gauge(
            f"{NIC}_nginx_last_reload_milliseconds",
            "Duration in milliseconds of the last NGINX reload",
            registry=r,
        )
        self.ingress_resources = Gauge(
            f"{NIC}_ingress_resources_total",
            "Number of handled Ingress resources",
            ["type"],
            registry=r,
        )
        self.virtualserver_resources = Gauge(
            f"{NIC}_virtualserver_resources_total",
            "Number of handled VirtualServer resources",
            registry=r,
        )
        # NIC's: served TransportServers by type (passthrough, tcp, udp).
        self.transportserver_resources = Gauge(
            f"{NIC}_transportserver_resources_total",
            "Number of handled TransportServer resources",
            ["type"],
            registry=r,
        )
        self.virtualserverroute_resources = Gauge(
            f"{NIC}_virtualserverroute_resources_total",
            "Number of handled VirtualServerRoute resources",
            registry=r,
        )
        self.workqueue_depth = Gauge(
            f"{NIC}_workqueue_depth", "Current depth of the workqueue", registry=r
        )
        self.reload_seconds = Histogram(
            "ferryman_nginx_reload_duration_seconds",
            "Time from writing a configuration to a worker answering its version",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
            registry=r,
        )
        self.endpoint_pushes = Counter(
            "ferryman_endpoints_pushes",
            "Endpoint updates applied to NGINX without a reload",
            registry=r,
        )
        self.nginx_restarts = Counter(
            "ferryman_nginx_restarts",
            "Times NGINX died unexpectedly and was started again",
            registry=r,
        )
        self.latency_samples_dropped = Counter(
            "ferryman_latency_samples_dropped",
            "Upstream latency samples not counted: for a host, backend or peer ferryman "
            "does not route to (unknown), or past the cap on series (series_limit)",
            ["reason"],
            registry=r,
        )
        self.queue_seconds = Histogram(
            f"{NIC}_workqueue_queue_duration_seconds",
            "How long an item stays in the workqueue before it is synced",
            registry=r,
        )
        self.work_seconds = Histogram(
            f"{NIC}_workqueue_work_duration_seconds",
            "How long syncing one item takes",
            registry=r,
        )
        self.push_seconds = Histogram(
            "ferryman_push_duration_seconds",
            "Time to push changed hosts, certificates and endpoint sets into NGINX",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
            registry=r,
        )
        self.generation_seconds = Histogram(
            "ferryman_config_generation_seconds",
            "Time to turn the resources changed since the last apply into NGINX's "
            "records and files (syncs plus the diff), per apply",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=r,
        )
        self.records_memory = Gauge(
            "ferryman_records_memory_ratio",
            "How full NGINX's memory for pushed records is (0..1), by store; "
            "from 0.9 only records up to 4 KiB and endpoint sets may grow, from 0.98 only "
            "endpoint sets",
            ["store"],
            registry=r,
        )
        self.records_refused = Counter(
            "ferryman_records_refused",
            "Records not pushed or refused by NGINX (their resources were rejected), by reason",
            ["reason"],
            registry=r,
        )
        self.readiness_gate_reviews = Counter(
            "ferryman_readiness_gate_webhook_reviews",
            "Pod admission reviews the readiness gate webhook answered, by result: "
            "injected (the gate added), unchanged (no patch), error (unreadable review)",
            ["result"],
            registry=r,
        )
        self.upstream_latency = Histogram(
            f"{NIC}_upstream_server_response_latency_ms",
            "Upstream server response latency, in milliseconds",
            ["upstream", "server", "code", "service", "resource_type", "resource_name",
             "resource_namespace", "pod_name"],
            buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000),
            registry=r,
        )  # fmt: skip
        # Readiness gates: written by the leader, which opens them; pending on every replica.
        self.gate_seconds = Histogram(
            "ferryman_readiness_gate_seconds",
            "Time from a pod's creation to ferryman opening its readiness gate (True)",
            buckets=(0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600),
            registry=r,
        )
        self.gate_flips = Counter(
            "ferryman_readiness_gate_flips",
            "Readiness gates opened, by result: applied (by every live replica), "
            "not_served (no served Service selects the pod), timed_out "
            "(--readiness-gate-timeout); error counts status writes that failed",
            ["result"],
            registry=r,
        )
        self.gates_pending = Gauge(
            "ferryman_readiness_gates_pending",
            "Pods whose ferryman readiness gate is not True yet",
            registry=r,
        )
        # Machine lifecycle hooks (drains/), counted by the leader.
        self.machine_drains = Counter(
            "ferryman_machine_drains",
            "Machine deletions whose pre-drain hook ferryman released, by result: drained "
            "(no request in flight to the Node's endpoints or replica), timed_out "
            "(--machine-drain-timeout), in_flight_timed_out (--drain-in-flight-timeout)",
            ["result"],
            registry=r,
        )
        self.machine_drain_seconds = Histogram(
            "ferryman_machine_drain_seconds",
            "Time from a Machine's deletion to ferryman releasing its pre-drain hook",
            buckets=(0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600),
            registry=r,
        )
        self.machines_draining = Gauge(
            "ferryman_machines_draining",
            "Machines being deleted whose drain ferryman's pre-drain hook holds",
            registry=r,
        )
        self.machine_hook_writes = Counter(
            "ferryman_machine_hook_writes",
            "Writes of ferryman's hooks on Machines, by result: added, removed, "
            "conflict (the Machine changed meanwhile: read again), error",
            ["result"],
            registry=r,
        )
        self.stub_status = StubStatusCollector()
        r.register(self.stub_status)
        self.workers = WorkerCounter()
        r.register(self.workers)
        self.in_flight = InFlightCollector()
        r.register(self.in_flight)
        # What /metrics serves: everything above, with NIC's constant label.
        self._exposed = CollectorRegistry(auto_describe=False)
        self._exposed.register(_ConstLabels(r, {"class": ingress_class}))
        self.reloads.labels(reason="other")
        self.reloads.labels(reason="endpoints")
        self.ingress_resources.labels(type="regular")
        self.last_reload_status.set(1)

    def exposition(self) -> bytes:
        return generate_latest(self._exposed)
