"""ferryman.sources.pods.PodInformers: a Pod informer runs exactly for the
opted-in namespaces (within --watch-namespace), and stopping one forgets its pods.

The informers themselves are lightkube's list+watch (tests/kubernetes); here a
host that records which informers run stands in for KubernetesSource.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from ferryman.resources.meta import ObjectRef
from ferryman.resources.readiness_gate import INJECT_ENABLED, INJECT_LABEL
from ferryman.sources.pods import PodInformers
from testkit.pods import GATE, pod_obj


class Host:
    def __init__(self) -> None:
        self.running: set[str] = set()
        self.forgotten: list[str] = []
        self.expected: list[str] = []

    def expect(self, kind: str, namespace: str) -> None:
        self.expected.append(namespace)

    async def informer(self, kind: str, namespace: str, stop: asyncio.Event) -> None:
        self.running.add(namespace)
        try:
            await stop.wait()
        finally:
            self.running.discard(namespace)

    def forget(self, kind: str, namespace: str) -> None:
        self.forgotten.append(namespace)


class Sink:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def upsert(self, obj: Mapping[str, Any]) -> None:
        self.seen.append(f"upsert {obj['metadata']['name']}")

    def delete(self, ref: ObjectRef) -> None:
        self.seen.append(f"delete {ref.name}")


def ns(name: str, enabled: bool = True) -> dict[str, Any]:
    labels = {INJECT_LABEL: INJECT_ENABLED if enabled else "disabled"}
    return {"kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def test_pod_informers_follow_the_opted_in_namespaces() -> None:
    async def scenario() -> tuple[Host, Sink, list[set[str]]]:
        host, sink, seen = Host(), Sink(), []
        informers = PodInformers(host, "Pod", sink, ("a", "b"))
        stop = asyncio.Event()
        runner = asyncio.create_task(informers.run(stop))

        async def settle() -> None:
            for _ in range(5):
                await asyncio.sleep(0)
            seen.append(set(host.running))

        informers.upsert(ns("a"))
        informers.upsert(ns("b"))
        informers.upsert(ns("elsewhere"))  # outside --watch-namespace
        informers.upsert(ns("a"))  # again: still one informer
        await settle()
        informers.upsert(ns("a", enabled=False))  # the label changed
        await settle()
        informers.delete(ObjectRef("Namespace", "", "b"))
        await settle()
        informers.upsert(ns("a"))
        await settle()
        stop.set()
        await runner
        await settle()
        return host, sink, seen

    host, sink, seen = asyncio.run(scenario())
    assert seen == [{"a", "b"}, {"b"}, set(), {"a"}, set()]
    assert host.forgotten == ["a", "b"]
    assert host.expected == ["a", "b", "a"]
    # The opted-in Namespaces reach the store too; others are taken out of it.
    assert sink.seen[:4] == ["upsert a", "upsert b", "delete elsewhere", "upsert a"]
    assert "delete b" in sink.seen


def test_a_namespace_opting_out_is_drained_of_pods_waiting_on_the_gate() -> None:
    """Its Pod informer runs on and the Namespace stays in the store (routing
    continues) until no pod waits on ferryman's gate and no endpoint is routed
    for one (a pod that just passed its gate, its EndpointSlice not yet ready):
    none is stranded, none answers 503 for a moment."""

    async def scenario() -> tuple[Host, Sink, list[set[str]]]:
        host, sink, seen = Host(), Sink(), []
        informers = PodInformers(host, "Pod", sink, (), "ferryman")
        stop = asyncio.Event()
        runner = asyncio.create_task(informers.run(stop))

        async def settle() -> None:
            for _ in range(5):
                await asyncio.sleep(0)
            seen.append(set(host.running))

        informers.upsert(ns("a"))
        informers.upsert(pod_obj("waits", namespace="a"))  # gate pending
        informers.upsert(pod_obj("open", namespace="a", conditions={GATE: "True"}))
        await settle()
        informers.delete(ObjectRef("Namespace", "", "a"))  # the label is removed
        await settle()
        informers.upsert(pod_obj("waits", namespace="a", conditions={GATE: "True"}))
        await settle()  # none waits any more, but its endpoint may be routed for it
        informers.settled(frozenset({"a"}))  # a flush: it is
        await settle()
        informers.settled(frozenset({"other"}))  # its EndpointSlice caught up: drained
        await settle()
        informers.upsert(ns("b"))
        informers.upsert(pod_obj("waits", namespace="b"))
        informers.delete(ObjectRef("Pod", "b", "waits"))  # deleted: waits no more
        informers.delete(ObjectRef("Namespace", "", "b"))
        await settle()
        stop.set()
        await runner
        return host, sink, seen

    host, sink, seen = asyncio.run(scenario())
    assert seen == [{"a"}, {"a"}, {"a"}, {"a"}, set(), set()]
    assert host.forgotten == ["a", "b"]
    namespaces = [e for e in sink.seen if e.endswith((" a", " b"))]
    assert namespaces == ["upsert a", "delete a", "upsert b", "delete b"]
