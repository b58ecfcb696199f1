"""Cordon a node and move its pods away through the Eviction API.

As ``kubectl drain --ignore-daemonsets --force`` does for the Machine API:
DaemonSet pods (their controller would put them back) and mirror pods (the
kubelet's static pods; the API cannot remove them) stay; every other pod is
evicted, so PodDisruptionBudgets hold: the API server answers 429 while an
eviction would break one, and the eviction is tried again. One call is one
bounded round; pods still there when it ends make it fail, and the caller
tries again later (the Machine API's 20 s round, then a requeue).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ferryman.kube import client as kube
from ferryman.kube.errors import Conflict, KubeError, NotFound
from ferryman.kube.resources import (
    AsyncClient,
    DeleteOptions,
    Node,
    ObjectMeta,
    Pod,
    Preconditions,
)

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


class DrainError(Exception):
    """The node is not drained yet; the message says what stays."""


@dataclass(frozen=True)
class PodKey:
    namespace: str
    name: str
    uid: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def to_evict(pods: Iterable[Mapping[str, Any]]) -> list[PodKey]:
    """The pods a drain must remove: not DaemonSet-controlled, not mirror pods."""
    keys = []
    for pod in pods:
        md = pod.get("metadata") or {}
        if MIRROR_ANNOTATION in (md.get("annotations") or {}):
            continue
        owners = md.get("ownerReferences") or []
        if any(o.get("controller") and o.get("kind") == "DaemonSet" for o in owners):
            continue
        keys.append(PodKey(md.get("namespace", ""), md.get("name", ""), md.get("uid", "")))
    return keys


async def cordon(client: AsyncClient, node: str) -> None:
    await kube.patch(client, Node, node, {"spec": {"unschedulable": True}})


async def drain(client: AsyncClient, node: str, timeout: float, retry_interval: float) -> bool:
    """Cordon ``node`` and evict its pods within ``timeout``; DrainError if some
    stay. False when the node is gone (nothing to drain: it counts as drained,
    as the Machine API has it when an admin deleted the Node)."""
    try:
        await cordon(client, node)
    except NotFound:
        return False
    except KubeError as e:
        raise DrainError(f"cordon failed: {e.message}") from e
    deadline = time.monotonic() + timeout
    pods = [
        p.to_dict()
        async for p in kube.items(client, Pod, namespace="*", fields={"spec.nodeName": node})
    ]
    waiting = to_evict(pods)
    refused: dict[PodKey, str] = {}
    pending = list(waiting)
    while pending:
        refused.clear()
        for key in pending:
            if reason := await _evict(client, key):
                refused[key] = reason
        pending = [k for k in pending if k in refused]
        if not pending or time.monotonic() + retry_interval > deadline:
            break
        await asyncio.sleep(retry_interval)
    # Evicted pods end gracefully; the node is drained when they are gone.
    remaining = [k for k in waiting if k not in refused]
    while remaining := [k for k in remaining if await _still_there(client, k)]:
        if time.monotonic() > deadline:
            break
        await asyncio.sleep(min(0.5, max(deadline - time.monotonic(), 0)))
    if refused or remaining:
        problems = [f"{k}: {why}" for k, why in refused.items()]
        problems += [f"{k}: still terminating" for k in remaining]
        raise DrainError(
            f"{len(problems)} pod(s) not evicted within {timeout:g}s: " + "; ".join(problems)
        )
    return True


async def _evict(client: AsyncClient, key: PodKey) -> str | None:
    """None once the eviction is accepted (or the pod is gone), else why not."""
    eviction = Pod.Eviction(
        metadata=ObjectMeta(name=key.name, namespace=key.namespace),
        # Only this pod: a pod of the same name made since must not go.
        deleteOptions=DeleteOptions(preconditions=Preconditions(uid=key.uid)),
    )
    try:
        await kube.create(client, eviction, key.name, namespace=key.namespace)
    except KubeError as e:
        if isinstance(e, NotFound) or (isinstance(e, Conflict) and key.uid):
            return None  # gone, or replaced (the uid precondition failed)
        return e.message or f"HTTP {e.status}"
    return None


async def _still_there(client: AsyncClient, key: PodKey) -> bool:
    try:
        pod = await kube.get(client, Pod, key.name, namespace=key.namespace)
    except NotFound:
        return False
    return pod.metadata is not None and pod.metadata.uid == key.uid
