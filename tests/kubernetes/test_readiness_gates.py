"""Readiness gates on a real cluster: a pod held back only by ferryman's gate is
not Ready (the test kubelet holds it, as a kubelet does), yet ferryman routes to
it in a namespace that opted in, and not in one that did not.

The gate is written into the pod template (no webhook needed). Another holder
keeps the leader-election Lease, so this ferryman never leads and never opens a
gate (the leader's job, tests/kubernetes/test_gates.py): the pod stays not Ready
throughout, and what is seen is routing alone.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Namespace, Pod
from lightkube.resources.discovery_v1 import EndpointSlice
from lightkube.types import PatchType

from ferryman.resources.readiness_gate import INJECT_ENABLED, INJECT_LABEL, gate_type
from testkit.apiserver import APIServer, apply, wait_until
from testkit.harness import Ferryman, ingress, path, rule, served_by
from testkit.kubelet import Kubelet
from testkit.kubernetes_mode import _status
from testkit.workloads import deployment, service


def gated(name: str, namespace: str) -> dict[str, Any]:
    d = deployment(name, namespace, 1, "v1")
    d["spec"]["template"]["spec"]["readinessGates"] = [{"conditionType": gate_type("ferryman")}]
    return d


def conditions(pod: Pod) -> dict[str, str]:
    return {c.type: c.status for c in (pod.status.conditions or [])} if pod.status else {}


def held_back(kube: Client, namespace: str) -> list[str]:
    """Names of the pods whose containers are ready but which are not Ready."""
    return [
        p.metadata.name
        for p in kube.list(Pod, namespace=namespace)
        if conditions(p).get("ContainersReady") == "True" and conditions(p).get("Ready") == "False"
    ]


@pytest.fixture
def plain_namespace(cluster: APIServer, kubelet: Kubelet, cluster_namespace: str) -> Iterator[str]:
    """A second namespace, without the opt-in label."""
    kube = cluster.client()
    name = f"{cluster_namespace}-plain"
    kube.create(Namespace(metadata=ObjectMeta(name=name)))
    yield name
    kube.delete(Namespace, name)


def lease_held_elsewhere(kube: Client, namespace: str, name: str) -> None:
    """A leader-election Lease another replica holds for the next hour."""
    now = datetime.datetime.now(datetime.UTC)
    kube.create(
        Lease(
            metadata=ObjectMeta(name=name, namespace=namespace),
            spec=LeaseSpec(
                holderIdentity="another-replica",
                leaseDurationSeconds=3600,
                acquireTime=now,
                renewTime=now,
            ),
        )
    )


@pytest.fixture(params=["gates", "gates+gateway-api"])
def ferryman(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    cluster: APIServer,
    cluster_namespace: str,
    plain_namespace: str,
) -> Iterator[Ferryman]:
    """With Gateway API too, every Namespace is watched besides the opted-in
    ones: both feed the store's Namespaces (sources/namespaces.py)."""
    lease_held_elsewhere(cluster.client(), cluster_namespace, "gates-leader")
    gateway_api = ["--enable-gateway-api"] if request.param == "gates+gateway-api" else []
    f = Ferryman(
        tmp_path / "ferryman",
        extra_args=[
            *gateway_api,
            "--readiness-gates",
            "--watch-namespace",
            f"{cluster_namespace},{plain_namespace}",
            *("--leader-election-namespace", cluster_namespace),
            *("--leader-election-lock-name", "gates-leader"),
        ],
        kubeconfig=cluster.kubeconfig,
        env={"POD_NAME": "ferryman-gates"},
    )
    yield f
    if f.proc is not None:
        f.stop()


def test_a_pod_held_back_by_ferrymans_gate_is_routed_to_only_where_opted_in(
    cluster: APIServer,
    kubelet: Kubelet,
    cluster_namespace: str,
    plain_namespace: str,
    ferryman: Ferryman,
) -> None:
    kube, ns, plain = cluster.client(), cluster_namespace, plain_namespace
    kube.patch(Namespace, ns, {"metadata": {"labels": {INJECT_LABEL: INJECT_ENABLED}}})
    for n, host in ((ns, "gated.test"), (plain, "plain.test")):
        apply(
            kube,
            gated("web", n),
            service("web", n),
            ingress("web", [rule(host, path("/", "web"))], namespace=n),
        )
    wait_until(lambda: len(held_back(kube, ns)) == 1, 60, "the opted-in pod held back")
    wait_until(lambda: len(held_back(kube, plain)) == 1, 60, "the other pod held back")
    ferryman.start()
    (pod,) = held_back(kube, ns)
    wait_until(lambda: served_by(ferryman, "gated.test", "/") == pod, 60, "the gated pod serves")
    assert {served_by(ferryman, "gated.test", f"/r{i}") for i in range(6)} == {pod}
    # Not opted in: the not-Ready pod gets no traffic, as without gates.
    assert served_by(ferryman, "plain.test", "/") == "503"
    # Routing did not make it Ready: the gate is still False (nobody opens it here).
    assert held_back(kube, ns) == [pod]

    # Opted in while ferryman runs: a Pod informer starts for the namespace.
    kube.patch(Namespace, plain, {"metadata": {"labels": {INJECT_LABEL: INJECT_ENABLED}}})
    (other,) = held_back(kube, plain)
    wait_until(lambda: served_by(ferryman, "plain.test", "/") == other, 60, "opted in")
    assert sorted(held_back(kube, ns) + held_back(kube, plain)) == sorted([pod, other])

    # Opted out while the pod still waits on the gate: not stranded, still routed
    # (the namespace is drained: watched until no pod waits).
    kube.patch(Namespace, ns, {"metadata": {"labels": {INJECT_LABEL: None}}})
    for i in range(10):
        assert served_by(ferryman, "gated.test", f"/o{i}") == pod
        time.sleep(0.2)
    # Its gate opens (by hand here): Ready, routed as any ready pod, and routed
    # all along, while its EndpointSlice still says not ready too (ferryman
    # stops watching the namespace's pods only once no endpoint is routed for
    # a gate: before, the Service answered 503 for a moment).
    open_gate(kube, ns, pod)
    answers = []
    deadline = time.monotonic() + 60
    while not endpoint_ready(kube, ns, "web") and time.monotonic() < deadline:
        answers.append(served_by(ferryman, "gated.test", "/g"))
    answers += [served_by(ferryman, "gated.test", f"/g{i}") for i in range(20)]
    assert set(answers) == {pod}, answers
    wait_until(lambda: held_back(kube, ns) == [], 60, "the pod Ready")
    assert served_by(ferryman, "gated.test", "/") == pod
    assert kubelet.errors == []


def endpoint_ready(kube: Client, namespace: str, service: str) -> bool:
    slices = kube.list(
        EndpointSlice, namespace=namespace, labels={"kubernetes.io/service-name": service}
    )
    return any(e.conditions and e.conditions.ready for s in slices for e in s.endpoints or ())


def open_gate(kube: Client, namespace: str, pod: str) -> None:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    condition = {"type": gate_type("ferryman"), "status": "True", "lastTransitionTime": now}
    kube.patch(
        Pod.Status,
        pod,
        {"status": {"conditions": [condition]}},
        namespace=namespace,
        patch_type=PatchType.STRATEGIC,
    )


MANY = 120  # opted-in namespaces: more than one HTTP/1.1 connection pool's 100


def test_many_opted_in_namespaces_do_not_exhaust_the_api_connections(
    tmp_path: Path, cluster: APIServer, kubelet: Kubelet, cluster_namespace: str
) -> None:
    """One Pod watch per opted-in namespace: ferryman still starts, routes, and its
    other API calls (the Lease, status) still get through."""
    kube, ns = cluster.client(), cluster_namespace
    labels = {INJECT_LABEL: INJECT_ENABLED}
    others = [f"{ns}-o{i}" for i in range(MANY)]
    for name in others:
        kube.create(Namespace(metadata=ObjectMeta(name=name, labels=labels)))
    try:
        kube.patch(Namespace, ns, {"metadata": {"labels": labels}})
        apply(
            kube,
            gated("web", ns),
            service("web", ns),
            ingress("web", [rule("many.test", path("/", "web"))], namespace=ns),
        )
        (pod,) = wait_until(lambda: held_back(kube, ns), 60, "the pod held back")
        f = Ferryman(
            tmp_path / "ferryman",
            extra_args=[
                *("--readiness-gates", "--report-ingress-status"),
                *("--ingress-address", "192.0.2.77"),
            ],
            kubeconfig=cluster.kubeconfig,
            env={"POD_NAME": "ferryman-many"},
        )
        # 120 Pod watches to list on a busy machine: more than a start's usual time.
        f.start(wait=False)
        f.wait_ready(90)
        try:
            wait_until(lambda: served_by(f, "many.test", "/") == pod, 60, "the gated pod serves")
            wait_until(lambda: _status(kube, ns, "web") == ["192.0.2.77"], 60, "Ingress status")
        finally:
            f.stop()
    finally:
        for name in others:
            kube.delete(Namespace, name)
