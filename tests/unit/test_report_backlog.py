"""What a start's backlog of Events and status costs (issue 31 item 3): an
Ingress's status is compared with what the informer saw (no read per Ingress,
no write where it is right), ferryman's own status write coming back through
the watch syncs nothing, and the reporter writes only while the worker has
nothing to do. Against a real API server: tests/kubernetes/test_kubernetes_mode.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ferryman.engine.queue_keys import QueueKey
from ferryman.engine.sink import QueueingSink
from ferryman.engine.store import Store
from ferryman.engine.workqueue import WorkQueue
from ferryman.kinds.ingress.spec import INGRESS
from ferryman.report.kubernetes import KubernetesReporter
from ferryman.resources.meta import ObjectRef
from testkit import harness
from testkit.controller_kit import Kit


def ingress(name: str, rv: str, addresses: tuple[str, ...] = (), host: str = "a.test") -> dict:
    status = {"loadBalancer": {"ingress": [{"ip": a} for a in addresses]}} if addresses else {}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv, "uid": "u-" + name},
        "spec": {"rules": [{"host": host}]},
        "status": status,
    }


class FakeClient:
    """Records each call the reporter makes; answers creates and patches."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    async def get(self, res: Any, name: str, namespace: str | None = None) -> Any:
        self.calls.append(("get", name))
        raise AssertionError("the reporter read an object it holds")

    async def create(self, obj: Any) -> Any:
        self.calls.append(("create", obj.metadata.name.partition(".")[0]))
        return obj

    async def patch(self, res: Any, name: str, body: Any, **_: Any) -> Any:
        self.calls.append(("patch", name))
        return None


async def until(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.001)


def reporter(store: Store, client: FakeClient) -> KubernetesReporter:
    r = KubernetesReporter(client, store.uid, read=store.get, kinds=(INGRESS,))  # type: ignore[arg-type]
    r.set_leader(True)
    return r


def test_status_is_compared_with_the_stored_ingress_not_read_again() -> None:
    async def scenario() -> list[tuple[str, str]]:
        store, client = Store((INGRESS,)), FakeClient()
        store.upsert(ingress("right", "1", ("192.0.2.1",)))
        store.upsert(ingress("bare", "1"))
        store.upsert(ingress("stale", "1", ("192.0.2.9",)))
        store.upsert(ingress("none", "1"))
        r = reporter(store, client)
        task = asyncio.create_task(r.run())
        for name in ("right", "bare", "stale"):
            r.status(ObjectRef("Ingress", "ns", name), ("192.0.2.1",))
        r.status(ObjectRef("Ingress", "ns", "none"), ())  # nothing shown, nothing wanted
        await until(lambda: ("patch", "stale") in client.calls)
        await until(lambda: r._queue.empty())
        task.cancel()
        return client.calls

    # Before: a read of each (4 gets) and a patch of the two that differ.
    assert asyncio.run(scenario()) == [("patch", "bare"), ("patch", "stale")]


def test_a_status_only_update_syncs_nothing() -> None:
    store, queue = Store((INGRESS,)), WorkQueue[QueueKey]()
    sink = QueueingSink(store, queue)
    ref = ObjectRef("Ingress", "ns", "web")
    sink.upsert(ingress("web", "1"))
    assert ref in queue
    queue._items.clear()
    queue._queued.clear()
    changes = store.changes
    # ferryman's own status write, seen again through the watch.
    sink.upsert(ingress("web", "2", ("192.0.2.1",)))
    assert len(queue) == 0
    assert store.changes == changes
    got = store.get("Ingress", "ns", "web")
    assert got is not None and got["metadata"]["resourceVersion"] == "2"
    assert got["status"]["loadBalancer"]["ingress"] == [{"ip": "192.0.2.1"}]
    sink.upsert(ingress("web", "3", ("192.0.2.1",), host="b.test"))  # the spec changed
    assert ref in queue
    assert store.changes == changes + 1


def test_a_namespace_update_syncs_even_when_nothing_kept_changed() -> None:
    # The Pod informers' own state rides on a Namespace's updates (a namespace
    # opting in again while drained): KindSpec.syncs_unchanged.
    store, queue = Store((INGRESS,)), WorkQueue[QueueKey]()
    sink = QueueingSink(store, queue)
    ns = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "ns", "resourceVersion": "1"},
    }
    sink.upsert(ns)
    first = len(queue)
    assert first > 0
    queue._items.clear()
    queue._queued.clear()
    sink.upsert({**ns, "metadata": {"name": "ns", "resourceVersion": "2"}})
    assert len(queue) == first


def test_events_and_status_wait_while_the_worker_has_work() -> None:
    async def scenario() -> None:
        store, client = Store((INGRESS,)), FakeClient()
        store.upsert(ingress("web", "1"))
        r = reporter(store, client)
        idle = asyncio.Event()  # the worker is busy
        r.defer_to(idle)
        task = asyncio.create_task(r.run())
        r.event(ObjectRef("Ingress", "ns", "web"), "Normal", "AddedOrUpdated", "ok")
        r.status(ObjectRef("Ingress", "ns", "web"), ("192.0.2.1",))
        for _ in range(200):
            await asyncio.sleep(0)
        assert client.calls == []
        idle.set()
        await until(lambda: len(client.calls) == 2)
        assert client.calls == [("create", "web"), ("patch", "web")]
        task.cancel()

    asyncio.run(scenario())


def test_the_worker_is_idle_only_once_a_change_is_pushed(tmp_path: Path) -> None:
    """``Controller.idle``, what the reporter waits for: cleared as a change
    is taken, set again only after its flush pushed it."""

    async def scenario() -> None:
        kit = Kit(tmp_path)
        await kit.drain()
        task = asyncio.create_task(kit.controller.run())
        await until(kit.controller.idle.is_set)
        kit.add(harness.ingress("web", [harness.rule("web.test", harness.path("/", "app"))]))
        await until(lambda: not kit.controller.idle.is_set())
        assert ("H", "web.test") not in kit.dataplane.records
        await until(kit.controller.idle.is_set)
        assert ("H", "web.test") in kit.dataplane.records
        task.cancel()

    asyncio.run(scenario())


def test_a_status_written_is_not_taken_back_from_a_store_behind_it() -> None:
    """The store shows ferryman's own write only once the watch brings it: a
    status wanted again before then is written, not judged by the older copy."""

    async def scenario() -> list[tuple[str, str]]:
        store, client = Store((INGRESS,)), FakeClient()
        store.upsert(ingress("web", "1"))  # no status shown
        r = reporter(store, client)
        task = asyncio.create_task(r.run())
        ref = ObjectRef("Ingress", "ns", "web")
        r.status(ref, ("192.0.2.1",))
        await until(lambda: ("patch", "web") in client.calls)
        r.status(ref, ())  # rejected before the watch brought the write back
        await until(lambda: client.calls.count(("patch", "web")) == 2)
        task.cancel()
        return client.calls

    assert asyncio.run(scenario()) == [("patch", "web"), ("patch", "web")]
