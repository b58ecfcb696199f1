"""The Gateway translator over a fake data plane: addresses from the pool,
statuses with observedGeneration published once per change, W records and
the listen file, ferryman's own ports refused."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ferryman.engine.settings import GatewaySettings, ListenSettings, NginxSettings
from ferryman.kinds.gateway.records.servers import GATEWAY_LISTENS_FILE
from ferryman.resources.meta import ObjectRef
from testkit.controller_kit import Kit

POOL = ("10.0.0.1", "10.0.0.2")


def _kit(tmp: Path, pool: tuple[str, ...] = POOL) -> Kit:
    return Kit(
        tmp,
        gateway=GatewaySettings(enabled=True, addresses=pool),
        listen=ListenSettings(http_port=18080, https_port=18443),
    )


def _class(name: str = "ferryman", controller: str = "ferryman.io/gateway-controller") -> dict:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "GatewayClass",
        "metadata": {"name": name, "generation": 3},
        "spec": {"controllerName": controller},
    }


def _gateway(name: str, port: int = 80, created: str = "2026-01-01T00:00:00Z", **spec: Any):
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {
            "name": name,
            "namespace": "infra",
            "generation": 2,
            "creationTimestamp": created,
        },
        "spec": {
            "gatewayClassName": "ferryman",
            "listeners": [{"name": "http", "port": port, "protocol": "HTTP"}],
            **spec,
        },
    }


def _route(name: str, gateway: str = "one", host: str = "a.example.com", generation: int = 1):
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": "infra", "generation": generation},
        "spec": {
            "parentRefs": [{"name": gateway}],
            "hostnames": [host],
            "rules": [{"backendRefs": [{"name": "svc", "port": 8080}]}],
        },
    }


def _service() -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "svc", "namespace": "infra"},
        "spec": {"ports": [{"port": 8080, "targetPort": 3000}]},
    }


def _sync(kit: Kit, *objs: dict) -> None:
    kit.add(*objs)
    asyncio.run(kit.drain())


def _conditions(status: Any) -> dict[str, tuple[str, str, int]]:
    return {
        c["type"]: (c["status"], c["reason"], c["observedGeneration"]) for c in status["conditions"]
    }


def test_class_gateway_and_route_statuses(tmp_path: Path) -> None:
    kit = _kit(tmp_path)
    _sync(kit, _class(), _class("other", "example.com/else"), _service())
    _sync(kit, _gateway("one"), _route("r1"))
    gc = kit.gateway_statuses[ObjectRef("GatewayClass", "", "ferryman")]
    assert _conditions(gc) == {"Accepted": ("True", "Accepted", 3)}
    assert ObjectRef("GatewayClass", "", "other") not in kit.gateway_statuses
    gw = kit.gateway_statuses[ObjectRef("Gateway", "infra", "one")]
    assert gw["addresses"] == [{"type": "IPAddress", "value": "10.0.0.1"}]
    assert _conditions(gw) == {
        "Accepted": ("True", "Accepted", 2),
        "Programmed": ("True", "Programmed", 2),
    }
    (listener,) = gw["listeners"]
    assert listener["attachedRoutes"] == 1
    assert _conditions(listener)["Programmed"] == ("True", "Programmed", 2)
    (parent,) = kit.gateway_statuses[ObjectRef("HTTPRoute", "infra", "r1")]["parents"]
    assert parent["parentRef"] == {
        "group": "gateway.networking.k8s.io",
        "kind": "Gateway",
        "namespace": "infra",
        "name": "one",
    }
    assert parent["controllerName"] == "ferryman.io/gateway-controller"
    assert _conditions(parent) == {
        "Accepted": ("True", "Accepted", 1),
        "ResolvedRefs": ("True", "ResolvedRefs", 1),
    }
    assert kit.dataplane.files[GATEWAY_LISTENS_FILE].endswith("listen 10.0.0.1:80;\n")
    record = kit.dataplane.records[("W", "10.0.0.1:80/a.example.com")]
    assert record.startswith("- 0 - U|infra/svc:8080|")
    # Nothing changed: nothing is written again.
    writes = kit.gateway_writes
    _sync(kit, _service())
    assert kit.gateway_writes == writes


def test_a_route_leaving_gets_its_parents_cleared(tmp_path: Path) -> None:
    kit = _kit(tmp_path)
    _sync(kit, _class(), _service(), _gateway("one"), _route("r1"))
    _sync(kit, _route("r1", gateway="elsewhere", generation=2))
    assert kit.gateway_statuses[ObjectRef("HTTPRoute", "infra", "r1")] == {"parents": []}
    assert not any(k[0] == "W" and "a.example.com" in k[1] for k in kit.dataplane.records)
    gw = kit.gateway_statuses[ObjectRef("Gateway", "infra", "one")]
    assert gw["listeners"][0]["attachedRoutes"] == 0


def test_addresses_asked_for_kept_and_exhausted(tmp_path: Path) -> None:
    kit = _kit(tmp_path)
    asked = _gateway("asked", addresses=[{"type": "IPAddress", "value": "10.0.0.2"}])
    _sync(kit, _class(), _gateway("one"), asked)
    statuses = kit.gateway_statuses
    assert statuses[ObjectRef("Gateway", "infra", "asked")]["addresses"][0]["value"] == "10.0.0.2"
    assert statuses[ObjectRef("Gateway", "infra", "one")]["addresses"][0]["value"] == "10.0.0.1"
    _sync(kit, _gateway("late", created="2026-02-01T00:00:00Z"))
    late = statuses[ObjectRef("Gateway", "infra", "late")]
    assert _conditions(late)["Programmed"] == ("False", "AddressNotAssigned", 2)
    assert late["addresses"] == []
    # Once one leaves, the waiting Gateway gets its address.
    kit.sink.delete(ObjectRef("Gateway", "infra", "one"))
    asyncio.run(kit.drain())
    late = statuses[ObjectRef("Gateway", "infra", "late")]
    assert late["addresses"] == [{"type": "IPAddress", "value": "10.0.0.1"}]


def test_a_restart_keeps_the_address_the_status_shows(tmp_path: Path) -> None:
    kit = _kit(tmp_path)
    had = _gateway("one")
    had["status"] = {"addresses": [{"type": "IPAddress", "value": "10.0.0.2"}]}
    _sync(kit, _class(), had)
    gw = kit.gateway_statuses[ObjectRef("Gateway", "infra", "one")]
    assert gw["addresses"][0]["value"] == "10.0.0.2"


def test_ferrymans_own_ports_are_refused_without_a_pool(tmp_path: Path) -> None:
    kit = _kit(tmp_path, pool=())
    _sync(kit, _class(), _gateway("one", port=18080), _gateway("two", port=9000))
    one = kit.gateway_statuses[ObjectRef("Gateway", "infra", "one")]
    listener = _conditions(one["listeners"][0])
    assert listener["Accepted"] == ("False", "PortUnavailable", 2)
    assert listener["Programmed"][0] == "False"
    assert "listen 18080" not in kit.dataplane.files[GATEWAY_LISTENS_FILE]
    assert "listen 9000;\n" in kit.dataplane.files[GATEWAY_LISTENS_FILE]


def test_an_invalid_route_is_rejected_with_the_field(tmp_path: Path) -> None:
    kit = _kit(tmp_path)
    bad = _route("bad")
    bad["spec"]["rules"][0]["matches"] = [{"path": {"type": "Exact", "value": "no-slash"}}]
    _sync(kit, _class(), _gateway("one"), bad)
    assert kit.reasons("bad") == ["Rejected"]
    assert "spec.rules[0].matches[0].path" in kit.messages("bad")[0]


def test_a_route_made_again_in_one_batch_gets_its_status_again(tmp_path: Path) -> None:
    kit = _kit(tmp_path)
    first = _route("r1")
    first["metadata"]["uid"] = "u1"
    _sync(kit, _class(), _service(), _gateway("one"), first)
    writes = kit.gateway_writes
    again = _route("r1")
    again["metadata"]["uid"] = "u2"
    kit.sink.delete(ObjectRef("HTTPRoute", "infra", "r1"))
    _sync(kit, again)
    assert kit.gateway_writes == writes + 1
    assert kit.gateway_statuses[ObjectRef("HTTPRoute", "infra", "r1")]["parents"]


def test_an_address_that_cannot_be_had_is_said_and_not_served(tmp_path: Path) -> None:
    kit = _kit(tmp_path)
    fake = _gateway("fake", addresses=[{"type": "test/fake", "value": "x"}])
    outside = _gateway("outside", port=81, addresses=[{"type": "IPAddress", "value": "192.0.2.7"}])
    _sync(kit, _class(), _service(), fake, outside, _route("r1", gateway="fake"))
    fake_status = kit.gateway_statuses[ObjectRef("Gateway", "infra", "fake")]
    assert _conditions(fake_status) == {
        "Accepted": ("False", "UnsupportedAddress", 2),
        "Programmed": ("False", "Invalid", 2),
    }
    outside_status = kit.gateway_statuses[ObjectRef("Gateway", "infra", "outside")]
    assert _conditions(outside_status) == {
        "Accepted": ("True", "Accepted", 2),
        "Programmed": ("False", "AddressNotUsable", 2),
    }
    assert fake_status["addresses"] == outside_status["addresses"] == []
    assert "listen" not in kit.dataplane.files[GATEWAY_LISTENS_FILE]
    assert not any(k[0] == "W" for k in kit.dataplane.records)
    # Asking for a usable address instead: served there.
    _sync(kit, _gateway("outside", port=81, addresses=[{"value": "10.0.0.2"}]))
    outside_status = kit.gateway_statuses[ObjectRef("Gateway", "infra", "outside")]
    assert _conditions(outside_status)["Programmed"] == ("True", "Programmed", 2)
    assert kit.dataplane.files[GATEWAY_LISTENS_FILE].endswith("listen 10.0.0.2:81;\n")


def test_a_route_too_large_for_its_records_is_not_accepted_and_the_others_are(
    tmp_path: Path,
) -> None:
    """Kubernetes mode's status for an HTTPRoute whose rules would make the
    listener's records larger than --max-record-bytes; the names it alone
    served fall through to wider ones, as without it."""
    kit = Kit(
        tmp_path,
        gateway=GatewaySettings(enabled=True, addresses=POOL),
        nginx=NginxSettings(max_record_bytes=4000),
    )
    big = _route("big", host="b.example.com")
    big["spec"]["rules"] = [
        {
            "matches": [{"path": {"value": f"/{i:03d}/" + "y" * 80}} for i in range(60)],
            "backendRefs": [{"name": "svc", "port": 8080}],
        }
    ]
    _sync(kit, _class(), _service(), _gateway("one"), _route("r1"), big)
    (parent,) = kit.gateway_statuses[ObjectRef("HTTPRoute", "infra", "big")]["parents"]
    accepted = next(c for c in parent["conditions"] if c["type"] == "Accepted")
    assert (accepted["status"], accepted["reason"]) == ("False", "UnsupportedValue")
    assert "more than --max-record-bytes 4000" in accepted["message"]
    assert kit.reasons("big") == ["Rejected"]
    (parent,) = kit.gateway_statuses[ObjectRef("HTTPRoute", "infra", "r1")]["parents"]
    assert _conditions(parent)["Accepted"] == ("True", "Accepted", 1)
    assert ("W", "10.0.0.1:80/a.example.com") in kit.dataplane.records
    assert ("W", "10.0.0.1:80/b.example.com") not in kit.dataplane.records


def test_a_gateway_with_infrastructure_parameters_is_invalid_parameters(tmp_path: Path) -> None:
    """ferryman has no parameters kind for Gateways: a parametersRef cannot
    resolve, so the Gateway is not accepted (the specification's
    InvalidParameters) and not served; its labels and annotations are fine."""
    kit = _kit(tmp_path)
    ref = {"group": "invalid.io", "kind": "InvalidParameters", "name": "invalid"}
    labelled = {"labels": {"team": "a"}, "annotations": {"note": "b"}}
    _sync(kit, _class(), _service())
    _sync(kit, _gateway("one", infrastructure={"parametersRef": ref}), _route("r1"))
    _sync(kit, _gateway("two", port=81, infrastructure=labelled), _route("r2", gateway="two"))
    gw = kit.gateway_statuses[ObjectRef("Gateway", "infra", "one")]
    assert _conditions(gw)["Accepted"] == ("False", "InvalidParameters", 2)
    assert "invalid.io/InvalidParameters invalid" in kit.messages("one")[0]
    assert not any(k[1].endswith(":80/a.example.com") for k in kit.dataplane.records)
    two = kit.gateway_statuses[ObjectRef("Gateway", "infra", "two")]
    assert _conditions(two)["Accepted"] == ("True", "Accepted", 2)
