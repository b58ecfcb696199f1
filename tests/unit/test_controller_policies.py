"""The controller and Policies over a fake data plane: a Policy change translates
exactly the VirtualServers that use it, its own status and Event are NIC's, and a
Policy whose spec did not move (its status was written) changes nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ferryman.resources.meta import ObjectRef
from testkit.controller_kit import Kit, _service


def _vs(name: str, policies: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "host": f"{name}.test",
            "upstreams": [{"name": "tea", "service": "app", "port": 80}],
            "routes": [
                {
                    "path": "/",
                    "action": {"pass": "tea"},
                    "policies": [{"name": p} for p in policies],
                }
            ],
        },
    }


def _policy(allow: str, status: dict[str, str] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "Policy",
        "metadata": {"name": "local", "namespace": "default"},
        "spec": {"accessControl": {"allow": [allow]}},
    }
    if status:
        obj["status"] = status
    return obj


def test_a_policy_change_translates_exactly_its_users(tmp_path: Path) -> None:
    kit = Kit(tmp_path)
    kit.add(*_service("app", "10.0.0.1"), _vs("cafe", ["local"]), _vs("other", []))
    asyncio.run(kit.drain())
    assert kit.messages("cafe")[-1].endswith("Policy default/local is missing or invalid")
    assert "|!" in kit.dataplane.records[("V", "cafe.test")]  # that route answers 500
    before = len(kit.messages("other"))

    kit.add(_policy("10.0.0.0/8"))
    asyncio.run(kit.drain())
    assert kit.reasons("cafe")[-1] == "AddedOrUpdated"
    assert "P|a|allow|4.0a000000.8" in kit.dataplane.records[("V", "cafe.test")]
    assert len(kit.messages("other")) == before  # not translated again
    policy_ref = ObjectRef("Policy", "default", "local")
    valid = (policy_ref, "Valid", "AddedOrUpdated", "Policy default/local was added or updated")
    assert valid in kit.resource_statuses

    # Its status written back (same spec): no Event, no translation.
    events = len(kit.reporter.events)
    kit.add(_policy("10.0.0.0/8", {"state": "Valid"}))
    asyncio.run(kit.drain())
    assert len(kit.reporter.events) == events

    kit.add(_policy("192.168.0.0/16"))
    asyncio.run(kit.drain())
    assert "P|a|allow|4.c0a80000.16" in kit.dataplane.records[("V", "cafe.test")]
    assert len(kit.messages("other")) == before
