"""Readiness gates against the real API server: the status write and the replica reports.

The pods here have no node (no kubelet): only the API server's handling of
ferryman's writes is under test.
"""

from __future__ import annotations

import asyncio
import datetime
import time
from typing import Any

import pytest
from lightkube import AsyncClient, Client
from lightkube.config.kubeconfig import KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Pod, PodStatus, ServiceAccount
from lightkube.types import PatchType

from ferryman.gates.decide import (
    APPLIED,
    WAITING,
    Condition,
    GatedPod,
    PodKey,
    Verdict,
    condition_patch,
    decide,
    live_replicas,
)
from ferryman.gates.flipper import write_condition
from ferryman.gates.report import CLASS_LABEL, ReplicaLease, lease_name, read_reports
from testkit.apiserver import APIServer

GATE = "target-health.ferryman.io/ferryman"
OTHER = "example.com/other"


def pod(name: str, namespace: str) -> Pod:
    return Pod.from_dict(
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "readinessGates": [{"conditionType": GATE}],
                "containers": [{"name": "c", "image": "echo"}],
            },
        }
    )


@pytest.fixture
def pods_namespace(kube: Client, namespace: str) -> str:
    """``namespace`` with the ServiceAccount pods are admitted with (no controller makes it)."""
    kube.create(ServiceAccount(metadata=ObjectMeta(name="default", namespace=namespace)))
    return namespace


def conditions(kube: Client, name: str, namespace: str) -> dict[str, dict[str, Any]]:
    p = kube.get(Pod, name, namespace=namespace)
    found = (p.status.conditions if p.status else None) or []
    return {c.type: c.to_dict() for c in found}


def client(apiserver: APIServer) -> AsyncClient:
    return AsyncClient(config=KubeConfig.from_file(apiserver.kubeconfig), field_manager="ferryman")


def write(
    apiserver: APIServer, key: PodKey, verdict: Verdict, have: Condition | None,
    now: str = "2026-01-01T00:00:00Z",
) -> bool:  # fmt: skip
    patch = condition_patch(GatedPod(key, 0.0, True, have), GATE, verdict, now)
    assert patch is not None

    async def go() -> bool:
        c = client(apiserver)
        try:
            return await write_condition(c, key, patch)
        finally:
            await c.close()

    return asyncio.run(go())


def test_the_gate_write_touches_no_other_condition(
    apiserver: APIServer, kube: Client, pods_namespace: str
) -> None:
    namespace = pods_namespace
    created = kube.create(pod("web-1", namespace))
    kube.patch(
        PodStatus,
        "web-1",
        {"status": {"conditions": [{"type": OTHER, "status": "True", "reason": "Theirs"}]}},
        namespace=namespace,
        patch_type=PatchType.STRATEGIC,
    )
    theirs = conditions(kube, "web-1", namespace)[OTHER]
    key = PodKey(namespace, "web-1", created.metadata.uid)
    waiting = Verdict(False, WAITING, "applied by 1 of 2 live ferryman replicas")
    assert write(apiserver, key, waiting, None)
    have = conditions(kube, "web-1", namespace)
    assert have[OTHER] == theirs
    assert have[GATE]["status"] == "False" and have[GATE]["reason"] == WAITING
    # Another message, the same status: the transition time stays.
    shown = Condition("False", WAITING, waiting.message, have[GATE]["lastTransitionTime"])
    later = Verdict(False, WAITING, "applied by 0 of 1 live ferryman replicas")
    assert write(apiserver, key, later, shown, now="2026-01-01T00:00:07Z")
    have = conditions(kube, "web-1", namespace)
    assert have[GATE]["message"] == later.message
    assert have[GATE]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    # A later write replaces ferryman's condition, still only it.
    shown = Condition("False", WAITING, later.message, have[GATE]["lastTransitionTime"])
    opened = Verdict(True, APPLIED, "applied by all 2")
    assert write(apiserver, key, opened, shown, now="2026-01-01T00:00:09Z")
    have = conditions(kube, "web-1", namespace)
    assert have[OTHER] == theirs
    assert have[GATE]["status"] == "True" and have[GATE]["message"] == "applied by all 2"
    assert have[GATE]["lastTransitionTime"] == "2026-01-01T00:00:09Z"
    listed = kube.get(Pod, "web-1", namespace=namespace).status.conditions
    assert [c.type for c in listed].count(GATE) == 1


def test_a_pod_recreated_under_its_name_is_not_given_the_old_ones_verdict(
    apiserver: APIServer, kube: Client, pods_namespace: str
) -> None:
    namespace = pods_namespace
    old = kube.create(pod("web-1", namespace))
    kube.delete(Pod, "web-1", namespace=namespace, grace_period=0)
    new = kube.create(pod("web-1", namespace))
    assert new.metadata.uid != old.metadata.uid
    stale = PodKey(namespace, "web-1", old.metadata.uid)
    assert not write(apiserver, stale, Verdict(True, APPLIED, "applied by all 1"), None)
    assert GATE not in conditions(kube, "web-1", namespace)
    # The same write with the pod's own UID goes through.
    fresh = PodKey(namespace, "web-1", new.metadata.uid)
    assert write(apiserver, fresh, Verdict(True, APPLIED, "applied by all 1"), None)
    assert conditions(kube, "web-1", namespace)[GATE]["status"] == "True"


def test_a_replica_reports_what_it_applied_and_withdraws_when_it_stops(
    apiserver: APIServer, kube: Client, namespace: str
) -> None:
    applied = {PodKey(namespace, "web-1", "u1")}

    async def go() -> None:
        c = client(apiserver)
        lease = ReplicaLease(
            c, namespace, "ferryman-report.lock.ferryman-a", "ferryman-a", "ferryman",
            lambda: frozenset(applied), 30,
        )  # fmt: skip
        task = asyncio.create_task(lease.run())
        try:
            deadline = time.monotonic() + 30  # the first write, on a busy API
            while not (reports := await read_reports(c, namespace, "ferryman")):
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            assert [(r.identity, r.applied, r.duration) for r in reports] == [
                ("ferryman-a", frozenset(applied), 30.0)
            ]
            assert abs(reports[0].renewed - time.time()) < 5
            # What it applied changes: the report follows at once, not at the renewal.
            applied.add(PodKey(namespace, "web-2", "u2"))
            lease.changed()
            # Under the renewal period (a third of 30 s), however busy the machine.
            deadline = time.monotonic() + 8
            while len((await read_reports(c, namespace, "ferryman"))[0].applied) != 2:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            # Another class's replicas are not counted.
            assert await read_reports(c, namespace, "other") == []
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await c.close()

    asyncio.run(go())
    try:
        kube.get(Lease, "ferryman-report.lock.ferryman-a", namespace=namespace)
    except ApiError as e:
        assert e.status.code == 404
    else:
        raise AssertionError("the stopped replica's Lease is still there")


def test_a_forged_report_renewed_in_the_future_does_not_hold_a_gate_closed(
    apiserver: APIServer, kube: Client, namespace: str
) -> None:
    """Whoever can write Leases in the namespace writes a report renewed in ten
    years (and the leader lock, labelled): the real replica's report decides."""
    key = PodKey(namespace, "web-1", "u1")
    future = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=3650)
    for name, holder in ((lease_name("lock", "forged"), "forged"), ("lock", "ferryman-a")):
        kube.create(
            Lease(
                metadata=ObjectMeta(name=name, labels={CLASS_LABEL: "ferryman"}),
                spec=LeaseSpec(
                    holderIdentity=holder, renewTime=future, leaseDurationSeconds=3650 * 86400
                ),
            ),
            namespace=namespace,
        )

    async def go() -> Verdict:
        c = client(apiserver)
        lease = ReplicaLease(
            c, namespace, lease_name("lock", "ferryman-a"), "ferryman-a", "ferryman",
            lambda: frozenset({key}), 30,
        )  # fmt: skip
        task = asyncio.create_task(lease.run())
        try:
            deadline = time.monotonic() + 30  # the first write, on a busy API
            while len(reports := await read_reports(c, namespace, "ferryman", 30)) < 2:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            now = time.time()
            return decide(GatedPod(key, now, True, None), live_replicas(reports, now), now, 0)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await c.close()

    verdict = asyncio.run(go())
    assert (verdict.reason, verdict.message) == (
        "Applied",
        "applied by all 1 live ferryman replicas",
    )
