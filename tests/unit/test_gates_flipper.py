"""ferryman.gates.flipper: what the leader writes, when, and what it counts."""

from __future__ import annotations

import asyncio
from typing import Any

from ferryman.gates.decide import (
    APPLIED,
    TIMED_OUT,
    WAITING,
    Condition,
    GatedPod,
    PodKey,
    ReplicaReport,
)
from ferryman.gates.flipper import BACKOFF_FIRST, Flipper, GateSettings
from ferryman.observability.metrics import Metrics

GATE = "target-health.ferryman.io/ferryman"
POD = PodKey("ns", "web-1", "u1")
NOW = 1000.0


class Cluster:
    """The flipper's surroundings: pods, reports, leadership, and a status API
    that records writes (or fails them while ``failing``)."""

    def __init__(self, timeout: float = 0.0) -> None:
        self.pods = [GatedPod(POD, NOW - 3, True, None)]
        self.applied: dict[str, frozenset[PodKey]] = {"a": frozenset(), "b": frozenset()}
        self.leader = True
        self.failing = False
        self.writes: list[tuple[PodKey, dict[str, Any]]] = []
        self.warnings: list[tuple[PodKey, str]] = []
        self.metrics = Metrics()
        self.flipper = Flipper(
            self._write,
            GateSettings(GATE, timeout),
            lambda: self.pods,
            self._reports,
            lambda: self.leader,
            lambda key, message: self.warnings.append((key, message)),
            self.metrics,
        )

    async def _write(self, key: PodKey, patch: dict[str, Any]) -> bool:
        if self.failing:
            raise ConnectionError("API unreachable")
        self.writes.append((key, patch))
        return True

    async def _reports(self, now: float) -> list[ReplicaReport]:
        return [ReplicaReport(r, now, 30, keys) for r, keys in self.applied.items()]

    def round(self, now: float = NOW) -> None:
        asyncio.run(self.flipper.once(now))

    def last(self) -> dict[str, Any]:
        condition: dict[str, Any] = self.writes[-1][1]["status"]["conditions"][0]
        return condition

    def sample(self, name: str, **labels: str) -> float:
        return self.metrics.registry.get_sample_value(name, labels) or 0.0


def test_the_gate_opens_once_every_replica_applied() -> None:
    c = Cluster()
    c.applied["a"] = frozenset({POD})
    c.round()
    assert c.last()["status"] == "False" and c.last()["reason"] == WAITING
    assert c.last()["message"] == "applied by 1 of 2 live ferryman replicas (waiting for: b)"
    c.applied["b"] = frozenset({POD})
    c.round(NOW + 1)
    assert c.last()["status"] == "True" and c.last()["reason"] == APPLIED
    assert c.sample("ferryman_readiness_gate_flips_total", result="applied") == 1
    assert c.sample("ferryman_readiness_gate_seconds_count") == 1
    assert c.sample("ferryman_readiness_gate_seconds_sum") == 4  # created 3 s before NOW


def test_a_verdict_written_is_not_written_again_while_the_cache_catches_up() -> None:
    c = Cluster()
    c.round()
    c.round(NOW + 0.5)
    assert len(c.writes) == 1
    # Once the Pod cache shows it, the patch itself finds nothing to change.
    c.pods = [GatedPod(POD, NOW - 3, True, Condition("False", WAITING, c.last()["message"], "T"))]
    c.round(NOW + 10)
    assert len(c.writes) == 1


def test_only_the_leader_writes_but_every_replica_counts_pending_gates() -> None:
    c = Cluster()
    c.leader = False
    c.round()
    assert c.writes == []
    assert c.sample("ferryman_readiness_gates_pending") == 1


def test_a_failed_write_backs_off_then_retries() -> None:
    c = Cluster()
    c.failing = True
    c.round()
    assert c.sample("ferryman_readiness_gate_flips_total", result="error") == 1
    c.failing = False
    c.round(NOW + BACKOFF_FIRST / 2)
    assert c.writes == []
    c.round(NOW + BACKOFF_FIRST)
    assert len(c.writes) == 1


def test_the_timeout_opens_the_gate_with_a_warning() -> None:
    c = Cluster(timeout=10)
    c.round(NOW + 6)  # 9 s old
    assert c.last()["status"] == "False" and c.warnings == []
    c.round(NOW + 7)
    assert c.last()["status"] == "True" and c.last()["reason"] == TIMED_OUT
    assert c.warnings == [(POD, c.last()["message"])]
    assert "waiting for: a, b" in c.warnings[0][1]
    assert c.sample("ferryman_readiness_gate_flips_total", result="timed_out") == 1


def test_a_pod_no_served_service_selects_gets_true() -> None:
    c = Cluster()
    c.pods = [GatedPod(POD, NOW - 3, False, None)]
    c.round()
    assert c.last()["status"] == "True"
    assert c.sample("ferryman_readiness_gate_flips_total", result="not_served") == 1
