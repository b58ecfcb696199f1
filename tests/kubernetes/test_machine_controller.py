"""`ferryman machine-controller` walks Machine deletions on a real cluster.

The API server, its Eviction API, PodDisruptionBudgets (whose status the
disruption controller computes) and admission webhooks are Kubernetes' own
(tools/testapiserver --controllers all); each Machine's Node is a test kubelet
running its pods as processes. The test plays the hook owners: a "ferryman"
hook and a foreign one, removed when the test says so. What is asserted is
what a user sees: the Machine's conditions, phase and finalizers, its Events
in order, the Node, its pods, the instance, and the webhook's answers.
"""

# The Machine API fixtures are testkit.machine_controller's, imported by name
# (pytest binds imported fixtures as the module's own).
# ruff: noqa: F811

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client, codecs
from lightkube.core.exceptions import ApiError
from lightkube.resources.apps_v1 import DaemonSet
from lightkube.resources.core_v1 import Event, Node, Pod
from lightkube.resources.policy_v1 import PodDisruptionBudget
from lightkube.types import PatchType

from ferryman.machines.hooks import Hook
from testkit.apiserver import apply, wait_until
from testkit.kubelet import Kubelet
from testkit.machine_controller import (  # noqa: F401 (fixtures)
    FOREIGN,
    FOREIGN_GO,
    FOREIGN_HOOK,
    MANIFESTS,
    ROOT,
    ControllerProcess,
    Machine,
    bare_pod,
    blocked,
    condition,
    controller,
    events,
    get,
    instances,
    kube,
    machine_crd,
    make_machine,
    node,
    own,
    ready,
)

FERRYMAN = {"name": "ferryman-traffic", "owner": "ferryman.io/ingress-controller"}
FERRYMAN_GO = "{Name:ferryman-traffic Owner:ferryman.io/ingress-controller}"
CAPI_DRAIN = "pre-drain.delete.hook.machine.cluster.x-k8s.io/ferryman-traffic"
CAPI_TERMINATE = "pre-terminate.delete.hook.machine.cluster.x-k8s.io/etcd-leave"
FERRYMAN_HOOK = Hook(FERRYMAN["name"], FERRYMAN["owner"])
# The owner's value is not compared on removal: only the key goes.
CAPI_DRAIN_HOOK = Hook("ferryman-traffic", "", annotation=True)
CAPI_TERMINATE_HOOK = Hook("etcd-leave", "", annotation=True)
DENIED = 'admission webhook "validation.machine.machine.openshift.io" denied the request: '


# ---------------------------------------------------------------- fixtures


@pytest.fixture
def ns(cluster_namespace: str) -> str:
    return cluster_namespace


# ---------------------------------------------------------------- helpers


def shows(kube: Client, ns: str, name: str, kind: str, want: dict[str, str]) -> bool:
    return condition(get(kube, ns, name), kind) == want


def rounds(kube: Client, ns: str, name: str) -> list[tuple[str, float]]:
    """(reason, seconds since the first) of the Machine's drain Events."""
    found = list(
        kube.list(
            Event,
            namespace=ns,
            fields={"involvedObject.kind": "Machine", "involvedObject.name": name},
        )
    )
    times = sorted((e.eventTime.timestamp(), e.reason or "") for e in found if e.eventTime)
    return [(reason, t - times[0][0]) for t, reason in times]


def pods_on(kube: Client, node: str) -> set[str]:
    return {
        p.metadata.name
        for p in kube.list(Pod, namespace="*", fields={"spec.nodeName": node})
        if p.metadata and p.metadata.name
    }


def gone(kube: Client, res: Any, name: str, namespace: str | None = None) -> bool:
    try:
        kube.get(res, name, namespace=namespace)
    except ApiError as e:
        return e.status.code == 404
    return False


def still(check: Any, seconds: float) -> bool:
    """``check`` holds throughout ``seconds`` (what must not happen does not)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not check():
            return False
        time.sleep(0.1)
    return True


# ---------------------------------------------------------------- tests


def test_deletion_waits_for_each_hook_owner_then_drains_and_terminates(
    kube: Client, controller: ControllerProcess, node: Kubelet, ns: str, instances: Path
) -> None:
    name = "worker-a"
    # What the drain must move, and what it must leave: a DaemonSet's pod
    # (its controller would put it back) and a mirror pod (the kubelet's own).
    kube.create(bare_pod(ns, "web-1", node.node))
    ds = kube.create(
        DaemonSet.from_dict(
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {"name": "agent", "namespace": ns},
                "spec": {
                    "selector": {"matchLabels": {"app": "agent"}},
                    "template": {
                        "metadata": {"labels": {"app": "agent"}},
                        "spec": {"containers": [{"name": "a", "image": "agent"}]},
                    },
                },
            }
        )
    )
    owner = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "name": "agent",
        "uid": ds.metadata.uid,
        "controller": True,
    }
    kube.create(bare_pod(ns, "agent-x", node.node, ownerReferences=[owner]))
    kube.create(
        bare_pod(ns, "static-x", node.node, annotations={"kubernetes.io/config.mirror": "x"})
    )
    wait_until(lambda: ready(kube, ns, "web-1"), 60, "web-1 running on the machine's node")

    make_machine(
        kube,
        ns,
        name,
        node.node,
        instances,
        pre_drain=[FERRYMAN, FOREIGN],
        pre_terminate=[FERRYMAN],
    )
    # While it lives: the finalizer, and conditions that say what deletion would wait for.
    wait_until(
        lambda: (
            "machine.machine.openshift.io"
            in (get(kube, ns, name)["metadata"].get("finalizers") or [])
        ),
        60,
        "the finalizer",
    )
    wait_until(
        lambda: shows(
            kube,
            ns,
            name,
            "Drainable",
            blocked("Drainable", "Drain", f"{FERRYMAN_GO} {FOREIGN_GO}"),
        ),
        60,
        "Drainable",
    )
    assert shows(kube, ns, name, "Terminable", blocked("Terminable", "Terminate", FERRYMAN_GO))
    assert get(kube, ns, name)["status"]["phase"] == "Running"

    kube.delete(Machine, name, namespace=ns)
    wait_until(
        lambda: get(kube, ns, name)["status"].get("phase") == "Deleting", 60, "phase Deleting"
    )
    wait_until(
        lambda: ("DrainBlocked", "Drain blocked by pre-drain hook") in events(kube, ns, name),
        60,
        "DrainBlocked",
    )
    # Blocked: no cordon, no eviction, for as long as any pre-drain hook stays.
    assert still(lambda: not kube.get(Node, node.node).spec.unschedulable, 1.5)
    assert "web-1" in pods_on(kube, node.node)

    own(kube, ns, name, "preDrain", FOREIGN_HOOK, present=False)  # the foreign owner is done
    wait_until(
        lambda: shows(kube, ns, name, "Drainable", blocked("Drainable", "Drain", FERRYMAN_GO)),
        60,
        "one hook left",
    )
    assert still(lambda: not kube.get(Node, node.node).spec.unschedulable, 1.0)
    assert condition(get(kube, ns, name), "Drained") is None

    own(kube, ns, name, "preDrain", FERRYMAN_HOOK, present=False)  # ferryman is done
    wait_until(
        lambda: shows(
            kube, ns, name, "Drained", {"status": "True", "message": "Drain finished successfully"}
        ),
        60,
        "the drain",
    )
    machine = get(kube, ns, name)
    assert condition(machine, "Drainable") == {"status": "True"}
    assert kube.get(Node, node.node).spec.unschedulable is True
    assert pods_on(kube, node.node) == {"agent-x", "static-x"}
    # Drained, but a pre-terminate hook holds the instance, the Node and the Machine.
    assert condition(machine, "Terminable") == blocked("Terminable", "Terminate", FERRYMAN_GO)
    assert still(lambda: (instances / f"{ns}.{name}").exists(), 1.5)
    assert kube.get(Node, node.node) is not None
    assert get(kube, ns, name)["metadata"]["finalizers"] == ["machine.machine.openshift.io"]

    own(kube, ns, name, "preTerminate", FERRYMAN_HOOK, present=False)
    wait_until(lambda: gone(kube, Machine, name, ns), 60, "the Machine to go")
    assert not (instances / f"{ns}.{name}").exists()
    assert gone(kube, Node, node.node)
    assert events(kube, ns, name) == [
        ("DrainBlocked", "Drain blocked by pre-drain hook"),
        ("DrainBlocked", "Drain blocked by pre-drain hook"),
        ("DrainProceeds", "Node drain proceeds"),
        ("Deleted", f'Node "{node.node}" drained'),
        ("DrainSucceeded", "Node drain succeeded"),
    ]


def test_pod_disruption_budget_holds_the_drain_until_it_allows(
    kube: Client, controller: ControllerProcess, node: Kubelet, ns: str, instances: Path
) -> None:
    name = "worker-b"
    for pod in ("web-1", "web-2"):
        kube.create(bare_pod(ns, pod, node.node))
    kube.create(
        PodDisruptionBudget.from_dict(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "web", "namespace": ns},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
            }
        )
    )

    def allows(n: int) -> bool:
        pdb = kube.get(PodDisruptionBudget, "web", namespace=ns)
        return bool(
            pdb.status and pdb.status.disruptionsAllowed == n and pdb.status.currentHealthy == 2
        )

    wait_until(lambda: allows(1), 60, "the disruption controller's count")
    make_machine(kube, ns, name, node.node, instances)
    wait_until(lambda: shows(kube, ns, name, "Drainable", {"status": "True"}), 60, "Drainable")
    kube.delete(Machine, name, namespace=ns)

    # One pod may go; the other's eviction is refused (429) round after round.
    def drain_error() -> bool:
        c = condition(get(kube, ns, name), "Drained") or {}
        return c.get("reason") == "DrainError"

    wait_until(drain_error, 60, "Drained False with DrainError")
    c = condition(get(kube, ns, name), "Drained")
    assert c is not None and c["status"] == "False"
    assert c["message"].startswith("could not drain machine: 1 pod(s) not evicted within 3s: ")
    assert "disruption budget" in c["message"]
    assert len(pods_on(kube, node.node)) == 1
    # The Event follows the condition.
    requeued = wait_until(
        lambda: [n for r, n in events(kube, ns, name) if r == "DrainRequeued"], 60, "DrainRequeued"
    )
    assert requeued[0].startswith("Node drain requeued: 1 pod(s) not evicted")
    assert not gone(kube, Machine, name, ns)

    requeues = lambda: [r for r, _ in events(kube, ns, name)].count("DrainRequeued")  # noqa: E731
    wait_until(lambda: requeues() >= 2, 60, "a second failed round")
    kube.patch(
        PodDisruptionBudget,
        "web",
        {"spec": {"minAvailable": 0}},
        namespace=ns,
        patch_type=PatchType.MERGE,
    )
    wait_until(
        lambda: gone(kube, Machine, name, ns), 90, "the drain to finish once the budget allows"
    )
    assert pods_on(kube, node.node) == set()
    # Each failed round waits out its backoff (0.5 s, doubling) before the next,
    # though its own status write is a watch event that queues the Machine at once.
    timeline = rounds(kube, ns, name)
    failed = [t for r, t in timeline if r == "DrainRequeued"]
    proceeded = [t for r, t in timeline if r == "DrainProceeds"]
    assert len(proceeded) == len(failed) + 1
    for k, (t_failed, t_next) in enumerate(zip(failed, proceeded[1:], strict=True)):
        assert t_next - t_failed >= 0.5 * 2**k - 0.05, timeline
    reasons = [r for r, _ in events(kube, ns, name)]
    assert reasons[0] == "DrainProceeds" and reasons[-3:] == [
        "DrainProceeds",
        "Deleted",
        "DrainSucceeded",
    ]
    assert set(reasons[1:-3]) <= {"DrainRequeued", "DrainProceeds"}


def test_hooks_are_immutable_once_deletion_starts_and_removable(
    kube: Client, controller: ControllerProcess, ns: str, instances: Path
) -> None:
    name = "worker-c"
    # A Node that is gone already: the drain has nothing to move, but waits for
    # the hooks first (a Machine with no nodeRef would skip the drain at once).
    make_machine(
        kube,
        ns,
        name,
        "gone-node",
        instances,
        pre_drain=[FERRYMAN],
        annotations={CAPI_DRAIN: "ferryman"},
    )
    # Before deletion, hooks come and go freely.
    own(kube, ns, name, "preDrain", FOREIGN_HOOK, present=True)
    own(kube, ns, name, "preDrain", FOREIGN_HOOK, present=False)
    wait_until(lambda: get(kube, ns, name)["metadata"].get("finalizers"), 60, "the finalizer")
    kube.delete(Machine, name, namespace=ns)
    wait_until(
        lambda: get(kube, ns, name)["status"].get("phase") == "Deleting", 60, "phase Deleting"
    )

    def refused(patch: dict[str, Any]) -> str:
        with pytest.raises(ApiError) as e:
            kube.patch(Machine, name, patch, namespace=ns, patch_type=PatchType.MERGE)
        return str(e.value.status.message)

    frozen = (
        "immutable when machine is marked for deletion: the following hooks are new or changed:"
    )
    prefix = f"pre-drain hooks are {frozen} "
    assert refused({"spec": {"lifecycleHooks": {"preDrain": [FERRYMAN, FOREIGN]}}}) == (
        f"{DENIED}spec.lifecycleHooks.preDrain: Forbidden: {prefix}[{FOREIGN_GO}]"
    )
    moved = {**FERRYMAN, "owner": "someone-else"}
    assert refused({"spec": {"lifecycleHooks": {"preDrain": [moved]}}}) == (
        f"{DENIED}spec.lifecycleHooks.preDrain: Forbidden: {prefix}"
        "[{Name:ferryman-traffic Owner:someone-else}]"
    )
    assert refused({"metadata": {"annotations": {CAPI_TERMINATE: "etcd"}}}) == (
        f"{DENIED}metadata.annotations: Forbidden: pre-terminate hooks are {frozen} "
        "[{Name:etcd-leave Owner:etcd}]"
    )
    both = refused(
        {"spec": {"lifecycleHooks": {"preDrain": [FERRYMAN, FOREIGN], "preTerminate": [FOREIGN]}}}
    )
    assert both == (
        f"{DENIED}[spec.lifecycleHooks.preDrain: Forbidden: {prefix}[{FOREIGN_GO}], "
        f"spec.lifecycleHooks.preTerminate: Forbidden: pre-terminate hooks are {frozen} "
        f"[{FOREIGN_GO}]]"
    )
    # Nothing of that was stored; removals are allowed, and release the Machine.
    assert get(kube, ns, name)["spec"]["lifecycleHooks"] == {"preDrain": [FERRYMAN]}
    own(kube, ns, name, "preDrain", CAPI_DRAIN_HOOK, present=False)
    wait_until(
        lambda: shows(kube, ns, name, "Drainable", blocked("Drainable", "Drain", FERRYMAN_GO)),
        60,
        "the spec's hook alone",
    )
    own(kube, ns, name, "preDrain", FERRYMAN_HOOK, present=False)
    wait_until(lambda: gone(kube, Machine, name, ns), 60, "the Machine to go")
    assert events(kube, ns, name) == [
        ("DrainBlocked", "Drain blocked by pre-drain hook"),
        ("DrainBlocked", "Drain blocked by pre-drain hook"),
        ("DrainProceeds", "Node drain proceeds"),
        ("DrainSucceeded", "Node drain succeeded"),
    ]


def test_cluster_api_annotations_are_hooks_too(
    kube: Client, controller: ControllerProcess, node: Kubelet, ns: str, instances: Path
) -> None:
    name = "worker-d"
    kube.create(bare_pod(ns, "web-1", node.node))
    make_machine(
        kube, ns, name, node.node, instances,
        annotations={CAPI_DRAIN: "ferryman.io/ingress-controller", CAPI_TERMINATE: "etcd-operator"},
    )  # fmt: skip
    wait_until(
        lambda: shows(kube, ns, name, "Drainable", blocked("Drainable", "Drain", FERRYMAN_GO)),
        60,
        "Drainable",
    )
    assert shows(
        kube,
        ns,
        name,
        "Terminable",
        blocked("Terminable", "Terminate", "{Name:etcd-leave Owner:etcd-operator}"),
    )
    kube.delete(Machine, name, namespace=ns)
    wait_until(
        lambda: [r for r, _ in events(kube, ns, name)] == ["DrainBlocked"], 60, "DrainBlocked"
    )
    assert still(lambda: not kube.get(Node, node.node).spec.unschedulable, 1.0)

    own(kube, ns, name, "preDrain", CAPI_DRAIN_HOOK, present=False)
    wait_until(
        lambda: shows(
            kube, ns, name, "Drained", {"status": "True", "message": "Drain finished successfully"}
        ),
        60,
        "the drain",
    )
    assert pods_on(kube, node.node) == set()
    assert still(
        lambda: (instances / f"{ns}.{name}").exists() and not gone(kube, Node, node.node), 1.0
    )

    own(kube, ns, name, "preTerminate", CAPI_TERMINATE_HOOK, present=False)
    wait_until(lambda: gone(kube, Machine, name, ns), 60, "the Machine to go")
    assert gone(kube, Node, node.node) and not (instances / f"{ns}.{name}").exists()
    assert [r for r, _ in events(kube, ns, name)] == [
        "DrainBlocked",
        "DrainProceeds",
        "Deleted",
        "DrainSucceeded",
    ]


def test_the_deployment_and_webhook_manifests_are_valid(kube: Client, machine_crd: None) -> None:
    """What deploy/machine-controller/ holds besides RBAC, checked by the API server
    (server-side dry run: nothing runs, nothing is registered)."""
    apply(
        kube,
        *[
            d.to_dict()
            for d in codecs.load_all_yaml((ROOT / "deploy" / "namespace.yaml").read_text())
        ],
    )
    for f in ("deployment.yaml", "webhook.yaml"):
        for doc in codecs.load_all_yaml((MANIFESTS / f).read_text()):
            kube.create(doc, dry_run=True)


def test_a_new_process_resumes_a_deletion_where_the_last_one_stopped(
    kube: Client, controller: ControllerProcess, node: Kubelet, ns: str, instances: Path
) -> None:
    name = "worker-e"
    kube.create(bare_pod(ns, "web-1", node.node))
    make_machine(kube, ns, name, node.node, instances, pre_terminate=[FERRYMAN])
    wait_until(
        lambda: shows(
            kube, ns, name, "Terminable", blocked("Terminable", "Terminate", FERRYMAN_GO)
        ),
        60,
        "Terminable",
    )
    kube.delete(Machine, name, namespace=ns)
    wait_until(
        lambda: shows(
            kube, ns, name, "Drained", {"status": "True", "message": "Drain finished successfully"}
        ),
        60,
        "the drain",
    )
    controller.restart(kube)
    # The new process reads the drain as done: no second drain, only what is left.
    own(kube, ns, name, "preTerminate", FERRYMAN_HOOK, present=False)
    wait_until(lambda: gone(kube, Machine, name, ns), 60, "the Machine to go")
    assert gone(kube, Node, node.node) and not (instances / f"{ns}.{name}").exists()
    assert [r for r, _ in events(kube, ns, name)] == ["DrainProceeds", "Deleted", "DrainSucceeded"]
