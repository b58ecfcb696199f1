"""Pod informers that follow the opted-in namespaces (readiness gates).

Pods are the most numerous objects in a cluster and change the most, so
ferryman does not watch them all: only in namespaces labelled
``ferryman.io/pod-readiness-gate-inject=enabled``, where its readiness gate can
hold pods back. The Namespace informer (label-selected by the API server, so
only opted-in namespaces arrive) feeds ``PodInformers``, which starts a Pod
informer when a namespace arrives and stops it, deleting the pods it
delivered, when the namespace loses the label (the watch then reports it
deleted) or is deleted. With ``--watch-namespace``, only those namespaces.

A namespace that opts out while some of its pods still wait on ferryman's gate
is drained first: its Pod informer runs on, and the Namespace stays in the
store (so those pods stay routed and their gates can open), until none waits.
Stopping at once would strand them: not Ready, not routed, and nobody left to
open their gates.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any, Generic, Protocol, TypeVar

from ferryman.resources.meta import InvalidResource, ObjectRef, ref_of
from ferryman.resources.pod import gate_pending, parse_pod
from ferryman.resources.readiness_gate import opted_in
from ferryman.sources import Sink

K = TypeVar("K")
K_contra = TypeVar("K_contra", contravariant=True)


class Informers(Protocol[K_contra]):
    """What runs one informer (``KubernetesSource``)."""

    def expect(self, kind: K_contra, namespace: str) -> None: ...
    async def informer(self, kind: K_contra, namespace: str, stop: asyncio.Event) -> None: ...
    def forget(self, kind: K_contra, namespace: str) -> None: ...


class PodInformers(Generic[K]):
    """A sink for opted-in Namespaces and their Pods: passes them on, and keeps one
    Pod informer running per namespace it holds (or drains)."""

    def __init__(
        self,
        host: Informers[K],
        pods: K,
        sink: Sink,
        namespaces: tuple[str, ...] = (),
        ingress_class: str = "",
    ) -> None:
        """``ingress_class``: whose gate a pod may wait on."""
        self._host = host
        self._pods = pods
        self._sink = sink
        self._allowed = frozenset(namespaces)  # empty: every namespace
        self._class = ingress_class
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._stop = asyncio.Event()
        # namespace -> its pods whose gate is pending; the opted-out ones being drained.
        self._waiting: dict[str, set[str]] = {}
        self._draining: set[str] = set()
        # Drained of pending gates, but an endpoint may still be routed for one
        # until its EndpointSlice says ready: ended by ``settled``.
        self._settling: set[str] = set()

    def upsert(self, obj: Mapping[str, Any]) -> None:
        if obj.get("kind") == "Pod":
            self._sink.upsert(obj)
            ref = ref_of(obj)
            if ref is not None:
                self._pod_seen(ref, _waits(obj, self._class))
            return
        md = obj.get("metadata") or {}
        name = str(md.get("name") or "")
        labels = md.get("labels")
        if opted_in(labels if isinstance(labels, Mapping) else None) and self._watched(name):
            self._draining.discard(name)
            self._settling.discard(name)
            self._sink.upsert(obj)
            self._start(name)
        else:
            self._opt_out(ObjectRef("Namespace", "", name))

    def opted_in(self, namespace: str) -> bool:
        """Whether ``namespace`` carries the opt-in label now, as far as the watch
        has told (one being drained after opting out does not)."""
        return namespace in self._tasks and namespace not in self._draining

    def delete(self, ref: ObjectRef) -> None:
        if ref.kind == "Pod":
            self._sink.delete(ref)
            self._pod_seen(ref, False)
        else:
            self._opt_out(ref)

    def _opt_out(self, ref: ObjectRef) -> None:
        held = self._waiting.get(ref.name) or ref.name in self._settling
        if held and ref.name in self._tasks:
            self._draining.add(ref.name)  # the Namespace leaves the store once drained
        else:
            self._sink.delete(ref)
            self._end(ref.name)

    def _pod_seen(self, ref: ObjectRef, waits: bool) -> None:
        waiting = self._waiting.setdefault(ref.namespace, set())
        if waits:
            waiting.add(ref.name)
        else:
            waiting.discard(ref.name)
        if not waiting:
            del self._waiting[ref.namespace]
            if ref.namespace in self._draining:
                # The last gate passed (or its pod went): the Namespace and its
                # pods stay until no endpoint is routed for a gate (``settled``).
                self._settling.add(ref.namespace)

    def settled(self, gate_routed: frozenset[str]) -> None:
        """After a flush: ``gate_routed`` are the namespaces where a not-ready
        endpoint is still routed for its pod's gate; every other namespace that
        opted out and has no pending gate left stops being watched."""
        for namespace in sorted(self._settling - gate_routed):
            if namespace in self._waiting:  # a new pod waits again
                continue
            self._settling.discard(namespace)
            self._draining.discard(namespace)
            self._opt_out(ObjectRef("Namespace", "", namespace))

    def _watched(self, namespace: str) -> bool:
        return bool(namespace) and (not self._allowed or namespace in self._allowed)

    def _start(self, namespace: str) -> None:
        if namespace in self._tasks or self._stop.is_set():
            return
        self._host.expect(self._pods, namespace)
        self._tasks[namespace] = asyncio.create_task(
            self._host.informer(self._pods, namespace, self._stop), name=f"watch Pod {namespace}"
        )

    def _end(self, namespace: str) -> None:
        self._waiting.pop(namespace, None)
        self._settling.discard(namespace)
        task = self._tasks.pop(namespace, None)
        if task is not None:
            task.cancel()
            self._host.forget(self._pods, namespace)

    async def run(self, stop: asyncio.Event) -> None:
        """Until ``stop`` (or cancelled); then every Pod informer stops."""
        try:
            await stop.wait()
        finally:
            self._stop.set()
            tasks = list(self._tasks.values())
            self._tasks.clear()
            for t in tasks:
                t.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*tasks, return_exceptions=True)


def _waits(obj: Mapping[str, Any], ingress_class: str) -> bool:
    """Whether a pod waits on ``ingress_class``'s gate (and is not going away)."""
    try:
        pod = parse_pod(obj)
    except InvalidResource:
        return False
    return gate_pending(pod, ingress_class) and not pod.deleting
