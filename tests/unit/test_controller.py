"""The controller over a fake data plane: isolation of refused files, batching."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ferryman.dataplane.fake import FakeDataPlane
from testkit.controller_kit import Kit
from testkit.harness import ingress, path, rule, service_with_backends


def _ing(name: str, host: str) -> dict[str, object]:
    return ingress(name, [rule(host, path("/", "app"))])


def test_a_configuration_nginx_refuses_keeps_the_last_good_one(tmp_path: Path) -> None:
    kit = Kit(tmp_path, FakeDataPlane(refuse=frozenset({"broken"})))
    kit.add(_ing("good", "good.test"))
    kit.controller.set_file("nginx.conf", "broken")
    asyncio.run(kit.drain())
    assert kit.dataplane.reloads == 0
    assert kit.metric("nginx_ingress_controller_nginx_reload_errors_total") == 1
    assert kit.metric("nginx_ingress_controller_nginx_last_reload_status") == 0
    # Routes do not depend on the refused file: the Ingress is live.
    assert ("H", "good.test") in kit.dataplane.records
    assert kit.reasons("good") == ["AddedOrUpdated"]


def test_startup_applies_everything_with_one_push(tmp_path: Path) -> None:
    kit = Kit(tmp_path)
    kit.add(*(_ing(f"i{n}", f"h{n}.test") for n in range(50)))
    asyncio.run(kit.drain())
    assert kit.dataplane.pushes == 1
    assert len([k for k in kit.dataplane.records if k[0] == "H"]) == 50
    assert kit.reasons("i0") == ["AddedOrUpdated"]


def test_queued_changes_are_batched_into_one_push(tmp_path: Path) -> None:
    async def scenario() -> int:
        kit = Kit(tmp_path)
        await kit.drain()
        task = asyncio.create_task(kit.controller.run())
        kit.add(*(_ing(f"i{n}", f"h{n}.test") for n in range(20)))
        for _ in range(100):
            await asyncio.sleep(0.01)
            if kit.dataplane.pushes:
                break
        await asyncio.sleep(0.2)
        task.cancel()
        return kit.dataplane.pushes

    assert asyncio.run(scenario()) == 1


def test_config_generation_is_measured_once_per_apply(tmp_path: Path) -> None:
    kit = Kit(tmp_path)
    kit.add(*(_ing(f"i{n}", f"h{n}.test") for n in range(50)))
    asyncio.run(kit.drain())
    assert kit.metric("ferryman_config_generation_seconds_count") == 1
    # It covers the 50 syncs: at least the work the workqueue histogram saw.
    work = kit.metric("nginx_ingress_controller_workqueue_work_duration_seconds_sum")
    assert kit.metric("ferryman_config_generation_seconds_sum") >= work > 0


class _Pod:
    """What service_with_backends reads of a backend: a name and a port."""

    def __init__(self, name: str, port: int) -> None:
        self.name, self.port = name, port


def test_invalid_services_slices_and_classes_are_left_out(tmp_path: Path) -> None:
    """Hand-written manifests can hold what the API server would refuse: such an
    object is ignored (with a warning), the rest still routes."""
    good = service_with_backends("app", [_Pod("good", 8080)])
    (bad,) = service_with_backends("app", [_Pod("bad", 8081)])[1:]
    bad["endpoints"][0]["addresses"] = ["10.0.0.1\nH\tother.test\t- 0 x rr:1:10"]
    (odd_labels,) = service_with_backends("app", [_Pod("odd", 8082)])[1:]
    odd_labels["metadata"]["labels"] = ["kubernetes.io/service-name"]
    cls = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IngressClass",
        "metadata": {"name": "ferryman"},
        "spec": {"controller": ["ferryman.io/ingress-controller"]},
    }
    kit = Kit(tmp_path)
    kit.add(_ing("web", "web.test"), *good, bad, odd_labels, cls)
    asyncio.run(kit.drain())
    assert kit.dataplane.records[("E", "default/app:80")] == "127.0.0.1#8080"
    assert kit.reasons("web") == ["AddedOrUpdated"]
    # A Service that cannot be read has no endpoints.
    kit.add({**good[0], "spec": ["ports"]})
    asyncio.run(kit.drain())
    assert ("E", "default/app:80") not in kit.dataplane.records


def _count_slice_reads(kit: Kit) -> dict[str, int]:
    """Per Service, how often its EndpointSlices are read (once per computation of
    an endpoint set it feeds)."""
    reads: dict[str, int] = {}
    read = kit.store.slices_for

    def counted(namespace: str, service: str) -> list[Any]:
        reads[service] = reads.get(service, 0) + 1
        return read(namespace, service)

    kit.store.slices_for = counted  # type: ignore[method-assign]
    return reads


def test_startup_computes_each_endpoint_set_once(tmp_path: Path) -> None:
    """The Ingress's sync computes its backends; the Service keys its Service and
    slices queued are the same store state and compute nothing again."""
    kit = Kit(tmp_path)
    for n in range(20):
        kit.add(
            ingress(f"i{n}", [rule(f"h{n}.test", path("/", f"app{n}"))]),
            *service_with_backends(f"app{n}", [_Pod("a", 8080), _Pod("b", 8081)]),
        )
    reads = _count_slice_reads(kit)
    asyncio.run(kit.drain())
    assert reads == {f"app{n}": 1 for n in range(20)}
    assert kit.dataplane.records[("E", "default/app7:80")] == "127.0.0.1#8080 127.0.0.1#8081"


def test_a_change_after_the_ingress_synced_is_computed_again(tmp_path: Path) -> None:
    """An endpoint set computed earlier in a batch is computed again once the store
    changed: a slice that arrives between the Ingress's sync and its Service's
    is routed to."""
    kit = Kit(tmp_path)
    kit.add(_ing("web", "web.test"), *service_with_backends("app", [_Pod("a", 8080)]))
    reads = _count_slice_reads(kit)

    async def scenario() -> None:
        kit.controller.sync(await kit.queue.get())  # the Ingress: computes app:80
        (later,) = service_with_backends("app", [_Pod("b", 8081)])[1:]
        kit.add(later)
        await kit.drain()

    asyncio.run(scenario())
    assert reads == {"app": 2}
    assert kit.dataplane.records[("E", "default/app:80")] == "127.0.0.1#8080 127.0.0.1#8081"
