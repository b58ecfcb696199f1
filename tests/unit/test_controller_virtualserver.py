"""The controller's VirtualServer sync over a fake data plane: records, Events and
NIC's status, reported only once NGINX holds the records; a refused record
rejects the VirtualServer only."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ferryman.resources.meta import ObjectRef
from testkit.controller_kit import Kit, _service
from testkit.harness import ingress, path, rule

REF = ObjectRef("VirtualServer", "default", "cafe")


def _vs(host: str = "cafe.test", **route: Any) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": {"name": "cafe", "namespace": "default"},
        "spec": {
            "host": host,
            "upstreams": [{"name": "tea", "service": "app", "port": 80}],
            "routes": [{"path": "/", "action": {"pass": "tea"}, **route}],
        },
    }


def test_status_waits_for_the_records_then_says_valid(tmp_path: Path) -> None:
    async def scenario(kit: Kit) -> None:
        kit.dataplane.fail_pushes = True
        kit.add(*_service("app", "10.0.0.1"), _vs())
        await kit.drain()
        assert kit.resource_statuses == []  # nothing is live yet: nothing said
        kit.dataplane.fail_pushes = False
        task = asyncio.create_task(kit.controller.run())
        for _ in range(200):
            await asyncio.sleep(0.01)
            if kit.resource_statuses:
                break
        task.cancel()

    kit = Kit(tmp_path)
    asyncio.run(scenario(kit))
    message = "Configuration for default/cafe was added or updated "
    assert kit.resource_statuses == [(REF, "Valid", "AddedOrUpdated", message)]
    records = kit.dataplane.records
    assert records[("H", "cafe.test")] == "- 0 - rr:1:10"  # the stub: no route for the module
    assert records[("V", "cafe.test")].startswith(
        "- U|default/app:80|rr|1|10|-|-|-|0||0.-.-.-.- R|P|"
    )
    assert records[("E", "default/app:80")] == "10.0.0.1#8080"


def test_invalid_and_losing_virtual_servers_get_nics_status(tmp_path: Path) -> None:
    kit = Kit(tmp_path)
    older = ingress("shop", [rule("cafe.test", path("/", "app"))])
    older["metadata"]["creationTimestamp"] = "2024-01-01T00:00:00Z"
    kit.add(*_service("app", "10.0.0.1"), older, _vs())
    asyncio.run(kit.drain())
    assert kit.resource_statuses == [
        (REF, "Warning", "Rejected", "Host is taken by another resource")
    ]
    assert "V" not in {kind for kind, _ in kit.dataplane.records}
    kit.sink.delete(ObjectRef("Ingress", "default", "shop"))
    kit.add({**_vs(), "spec": {**_vs()["spec"], "host": "Bad_Host"}})
    asyncio.run(kit.drain())
    state, reason, message = kit.resource_statuses[-1][1:]
    assert (state, reason) == ("Invalid", "Rejected")
    assert message.startswith("VirtualServer default/cafe was rejected with error: spec.host: ")
    assert kit.dataplane.records.get(("H", "cafe.test")) is None


def test_a_missing_policy_makes_the_state_warning(tmp_path: Path) -> None:
    kit = Kit(tmp_path)
    kit.add(*_service("app", "10.0.0.1"))
    kit.add(_vs(policies=[{"name": "limit"}]))
    asyncio.run(kit.drain())
    ((_, state, reason, message),) = kit.resource_statuses
    assert (state, reason) == ("Warning", "AddedOrUpdatedWithWarning")
    assert message == (
        "Configuration for default/cafe was added or updated with warning(s): "
        "Policy default/limit is missing or invalid"
    )
    assert ("V", "cafe.test") in kit.dataplane.records  # served all the same (that route: 500)


def test_a_missing_tls_secret_is_a_warning_and_refuses_handshakes(tmp_path: Path) -> None:
    kit = Kit(tmp_path)
    obj = _vs()
    obj["spec"]["tls"] = {"secret": "absent"}
    kit.add(*_service("app", "10.0.0.1"), obj)
    asyncio.run(kit.drain())
    ((_, state, reason, message),) = kit.resource_statuses
    assert (state, reason) == ("Warning", "AddedOrUpdatedWithWarning")
    assert "TLS secret default/absent is unusable (not found)" in message
    assert kit.dataplane.records[("H", "cafe.test")].startswith("! ")  # "!": refuse TLS
