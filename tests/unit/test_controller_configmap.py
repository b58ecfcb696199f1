"""The controller's ConfigMap dispatch over a fake data plane: one reload per
effective change, none for a no-op, a refused one reported and undone."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ferryman.configs.configmap import ConfigMapState, Tuning
from ferryman.dataplane.fake import FakeDataPlane
from ferryman.engine.settings import TransportSettings
from testkit.controller_kit import Kit


def _render(t: Tuning) -> dict[str, str]:
    return {"nginx.conf": f"worker_connections {t.worker_connections}"}


def _kit(tmp: Path, refuse: frozenset[str] = frozenset()) -> Kit:
    return Kit(
        tmp, FakeDataPlane(refuse=refuse), configmap=ConfigMapState("ic", "nginx-config", _render)
    )


def _cm(**data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "nginx-config", "namespace": "ic"},
        "data": {k.replace("_", "-"): v for k, v in data.items()},
    }


def _sync(kit: Kit, obj: dict[str, Any]) -> None:
    kit.add(obj)
    asyncio.run(kit.drain())


def test_one_reload_per_effective_change_none_for_a_no_op(tmp_path: Path) -> None:
    kit = _kit(tmp_path)
    _sync(kit, _cm(worker_connections="2048"))
    assert kit.dataplane.files["nginx.conf"] == "worker_connections 2048"
    assert kit.dataplane.reloads == 1
    _sync(kit, _cm(worker_connections="+2048", unknown="x"))  # the same, written otherwise
    assert kit.dataplane.reloads == 1
    assert kit.reasons("nginx-config") == ["Updated", "Updated"]


def test_another_configmap_is_not_read(tmp_path: Path) -> None:
    kit = _kit(tmp_path)
    other = _cm(worker_connections="2048")
    other["metadata"]["namespace"] = "elsewhere"
    _sync(kit, other)
    assert kit.dataplane.reloads == 0
    assert kit.reporter.events == []


def test_a_bad_key_is_a_warning_and_keeps_its_value(tmp_path: Path) -> None:
    kit = _kit(tmp_path)
    _sync(kit, _cm(worker_connections="2048"))
    _sync(kit, _cm(worker_connections="lots"))
    assert kit.dataplane.files["nginx.conf"] == "worker_connections 2048"
    assert kit.dataplane.reloads == 1
    assert kit.reasons("nginx-config") == ["Updated", "InvalidValue", "UpdatedWithError"]
    assert "'worker-connections' contains invalid integer" in kit.messages("nginx-config")[1]


def test_a_refused_change_is_reported_and_the_last_good_kept(tmp_path: Path) -> None:
    kit = _kit(tmp_path, refuse=frozenset({"worker_connections 4096"}))
    _sync(kit, _cm(worker_connections="2048"))
    _sync(kit, _cm(worker_connections="4096"))
    assert kit.dataplane.files["nginx.conf"] == "worker_connections 2048"
    assert kit.reasons("nginx-config")[-1] == "UpdatedWithError"
    assert kit.messages("nginx-config")[-1] == (
        "ConfigMap ic/nginx-config was updated, but not applied: "
        "[emerg] refused in /state/nginx.conf:1"
    )
    assert kit.controller.route_defaults() == {}
    # A later good edit applies.
    _sync(kit, _cm(worker_connections="1024"))
    assert kit.dataplane.files["nginx.conf"] == "worker_connections 1024"


def test_refused_at_start_up_the_defaults_are_applied_instead(tmp_path: Path) -> None:
    kit = _kit(tmp_path, refuse=frozenset({"worker_connections 4096"}))
    _sync(kit, _cm(worker_connections="4096"))
    assert kit.dataplane.files == {}  # the refused start-up reload
    asyncio.run(kit.drain())  # the retry the refusal queued
    assert kit.dataplane.files["nginx.conf"] == "worker_connections 16384"


def test_the_route_level_keys_are_the_translators_defaults(tmp_path: Path) -> None:
    kit = _kit(tmp_path)
    _sync(kit, _cm(proxy_read_timeout="30"))
    assert kit.controller.route_defaults() == {"proxy-read-timeout": "30s"}


def test_after_a_refused_reload_other_files_still_reach_nginx(tmp_path: Path) -> None:
    """A refused reload puts the last good files back in place: TransportServers
    write stream.conf into the same dict, so a GlobalConfiguration's listener
    added after the refusal is applied (a fresh dict left it unseen)."""
    kit = Kit(
        tmp_path,
        FakeDataPlane(refuse=frozenset({"worker_connections 4096"})),
        configmap=ConfigMapState("ic", "nginx-config", _render),
        stream=True,
        transport=TransportSettings(global_configuration=("ic", "gc")),
    )
    _sync(kit, _cm(worker_connections="1024"))
    _sync(kit, _cm(worker_connections="4096"))
    assert kit.dataplane.files["nginx.conf"] == "worker_connections 1024"
    gc = {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "GlobalConfiguration",
        "metadata": {"name": "gc", "namespace": "ic"},
        "spec": {"listeners": [{"name": "dns-tcp", "port": 5353, "protocol": "TCP"}]},
    }
    _sync(kit, gc)
    assert "5353" in kit.dataplane.files["stream.conf"]
