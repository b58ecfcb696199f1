"""The controller over a fake data plane: isolation of refused files, batching."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ferryman.dataplane.fake import FakeDataPlane
from tests.controller_kit import Kit
from tests.integration.harness import ingress, path, rule


def _ing(name: str, host: str) -> dict[str, object]:
    return ingress(name, [rule(host, path("/", "app"))])


def test_a_file_nginx_refuses_is_isolated_and_reported(tmp_path: Path) -> None:
    kit = Kit(tmp_path, FakeDataPlane(refuse=frozenset({"conf.d/default_bad.conf"})))
    kit.add(_ing("good", "good.test"), _ing("bad", "bad.test"))
    asyncio.run(kit.drain())
    assert "conf.d/default_good.conf" in kit.dataplane.files
    assert "conf.d/default_bad.conf" not in kit.dataplane.files
    assert kit.reasons("bad") == ["AddedOrUpdatedWithError"]
    assert kit.reasons("good") == ["AddedOrUpdated"]
    assert kit.metric("nginx_ingress_controller_nginx_reload_errors_total") == 1
    assert kit.metric("nginx_ingress_controller_nginx_last_reload_status") == 1
    assert kit.dataplane.reloads == 1


def test_startup_applies_everything_with_one_reload(tmp_path: Path) -> None:
    kit = Kit(tmp_path)
    kit.add(*(_ing(f"i{n}", f"h{n}.test") for n in range(50)))
    asyncio.run(kit.drain())
    assert kit.dataplane.reloads == 1
    assert len([p for p in kit.dataplane.files if p.startswith("conf.d/")]) == 50
    assert (
        kit.metrics.registry.get_sample_value(
            "nginx_ingress_controller_nginx_reloads_total", {"reason": "other"}
        )
        == 1
    )


def test_queued_changes_are_batched_into_one_reload(tmp_path: Path) -> None:
    async def scenario() -> int:
        kit = Kit(tmp_path)
        await kit.drain()
        task = asyncio.create_task(kit.controller.run())
        kit.add(*(_ing(f"i{n}", f"h{n}.test") for n in range(20)))
        for _ in range(100):
            await asyncio.sleep(0.01)
            if kit.dataplane.reloads:
                break
        await asyncio.sleep(0.2)
        task.cancel()
        return kit.dataplane.reloads

    assert asyncio.run(scenario()) == 1
