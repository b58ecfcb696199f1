"""The controller over a fake data plane: isolation of refused files, batching."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ferryman.dataplane.fake import FakeDataPlane
from tests.integration.harness import ingress, path, rule, service_with_backends
from tests.unit.controller_kit import Kit


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
