"""Gateway API status against the real API server with the release's CRDs
(tools/conformance/build.sh): the writer of report/gateway_status.py writes
conditions with observedGeneration as given, keeps a condition's
lastTransitionTime while its status stays, keeps other controllers' route
parents (also when one writes meanwhile), writes nothing when the object
already shows the status, ignores objects that are gone, and writes only as
leader."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from lightkube import AsyncClient, Client
from lightkube.config.kubeconfig import KubeConfig
from lightkube.types import PatchType

from ferryman.report.gateway_status import GatewayStatusWriter
from ferryman.resources.meta import ObjectRef
from testkit.apiserver import APIServer, install_crds
from testkit.gateway_environment import build as build_conformance
from testkit.gateway_kinds import RESOURCES

OURS = "ferryman.io/gateway-controller"
THEIRS = "example.com/other-controller"
T0, T1, T2 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z"
_names = itertools.count()


@pytest.fixture(scope="module")
def gateway_crds(apiserver: APIServer) -> None:
    install_crds(apiserver.client(), *build_conformance().crd_files())


def cond(type_: str, status: str = "True", generation: int = 1, **more: Any) -> dict[str, Any]:
    reason = type_ if status == "True" else "Pending"
    return {"type": type_, "status": status, "reason": reason, "message": "",
            "observedGeneration": generation, **more}  # fmt: skip


def gateway_status(generation: int = 1, programmed: str = "True") -> dict[str, Any]:
    g = generation
    return {
        "addresses": [{"type": "IPAddress", "value": "127.0.0.10"}],
        "conditions": [cond("Accepted", "True", g), cond("Programmed", programmed, g)],
        "listeners": [
            {
                "name": "http",
                "attachedRoutes": 0,
                "supportedKinds": [{"kind": "HTTPRoute"}],
                "conditions": [cond("Accepted", "True", g), cond("ResolvedRefs", "True", g)],
            }
        ],
    }


def our_parent(gateway: str, namespace: str, status: str = "True") -> dict[str, Any]:
    return {
        "controllerName": OURS,
        "parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway",
                      "namespace": namespace, "name": gateway},
        "conditions": [cond("Accepted", status), cond("ResolvedRefs")],
    }  # fmt: skip


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> str:
        return self.now


class Racing(AsyncClient):
    """A client whose next read is followed, before ferryman's write, by another
    controller's write of its own route parent: a real concurrent change."""

    race: Callable[[], None] | None = None

    async def get(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        got = await super().get(*args, **kwargs)
        race, self.race = self.race, None
        if race is not None:
            race()
        return got


def objects(kube: Client, namespace: str) -> dict[str, ObjectRef]:
    n = next(_names)
    refs = {
        "class": ObjectRef("GatewayClass", "", f"status-{n}"),
        "gateway": ObjectRef("Gateway", namespace, "gw"),
        "route": ObjectRef("HTTPRoute", namespace, "web"),
    }
    kube.create(RESOURCES["GatewayClass"].from_dict(
        {"metadata": {"name": refs["class"].name}, "spec": {"controllerName": OURS}}
    ))  # fmt: skip
    kube.create(RESOURCES["Gateway"].from_dict({
        "metadata": {"name": "gw", "namespace": namespace},
        "spec": {"gatewayClassName": refs["class"].name,
                 "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]},
    }))  # fmt: skip
    kube.create(RESOURCES["HTTPRoute"].from_dict({
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {"parentRefs": [{"name": "gw"}, {"name": "elsewhere"}]},
    }))  # fmt: skip
    return refs


def status(kube: Client, ref: ObjectRef) -> dict[str, Any]:
    obj = kube.get(RESOURCES[ref.kind], ref.name, namespace=ref.namespace or None)
    return dict(obj.get("status") or {})


def version(kube: Client, ref: ObjectRef) -> str:
    obj = kube.get(RESOURCES[ref.kind], ref.name, namespace=ref.namespace or None)
    return str(obj.metadata.resourceVersion)


async def until(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def run_with_writer(
    apiserver: APIServer, scenario: Callable[[GatewayStatusWriter, Clock, Racing], Awaitable[None]]
) -> None:
    async def go() -> None:
        client = Racing(config=KubeConfig.from_file(apiserver.kubeconfig), field_manager="ferryman")
        clock = Clock()
        writer = GatewayStatusWriter(client, OURS, RESOURCES, now=clock)
        task = asyncio.create_task(writer.run())
        try:
            await scenario(writer, clock, client)
        finally:
            task.cancel()
            await client.close()

    asyncio.run(go())


def test_gateway_class_and_gateway_status_keep_transition_times(
    apiserver: APIServer, gateway_crds: None, kube: Client, namespace: str
) -> None:
    refs = objects(kube, namespace)
    gwc, gw = refs["class"], refs["gateway"]

    async def scenario(writer: GatewayStatusWriter, clock: Clock, client: Racing) -> None:
        writer.set_leader(True)
        writer.want(gwc, {"conditions": [cond("Accepted")]})
        writer.want(gw, gateway_status())
        await until(lambda: status(kube, gw).get("addresses") is not None, "the Gateway's status")
        await until(lambda: status(kube, gwc)["conditions"][0]["status"] == "True", "the class")
        assert status(kube, gwc) == {"conditions": [cond("Accepted", lastTransitionTime=T0)]}
        shown = status(kube, gw)
        assert shown["conditions"] == [
            cond("Accepted", lastTransitionTime=T0),
            cond("Programmed", lastTransitionTime=T0),
        ]
        assert shown["listeners"][0]["conditions"][1] == cond("ResolvedRefs", lastTransitionTime=T0)
        assert shown["listeners"][0]["supportedKinds"] == [
            {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}
        ]

        # Already shown: nothing is written (the resourceVersion stays).
        before = version(kube, gw)
        assert not await writer.write(gw, gateway_status())
        assert version(kube, gw) == before

        # A new generation: observedGeneration as given, the times of the
        # conditions whose status stays stay; Programmed turns False: now.
        kube.patch(RESOURCES["Gateway"], "gw", {"spec": {"listeners": [
            {"name": "http", "port": 8080, "protocol": "HTTP"}]}}, namespace=namespace,
            patch_type=PatchType.MERGE)  # fmt: skip
        clock.now = T1
        writer.want(gw, {**gateway_status(2, programmed="False"), "addresses": []})
        await until(lambda: status(kube, gw)["conditions"][0]["observedGeneration"] == 2, "gen 2")
        shown = status(kube, gw)
        assert shown["conditions"] == [
            cond("Accepted", generation=2, lastTransitionTime=T0),
            cond("Programmed", "False", 2, lastTransitionTime=T1),
        ]
        assert shown["listeners"][0]["conditions"][0] == cond(
            "Accepted", generation=2, lastTransitionTime=T0
        )
        assert shown["addresses"] == []

        # Latest wins: of two wanted statuses in a row only the second is written.
        clock.now = T2
        writer.want(gwc, {"conditions": [cond("Accepted", "False")]})
        writer.want(gwc, {"conditions": [cond("Accepted", reason="Again")]})
        await until(lambda: status(kube, gwc)["conditions"][0]["reason"] == "Again", "latest")
        assert status(kube, gwc)["conditions"][0]["lastTransitionTime"] == T0

    run_with_writer(apiserver, scenario)


def test_route_parents_of_other_controllers_are_kept(
    apiserver: APIServer, gateway_crds: None, kube: Client, namespace: str
) -> None:
    route = objects(kube, namespace)["route"]
    theirs = {
        "controllerName": THEIRS,
        "parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway",
                      "namespace": namespace, "name": "elsewhere"},
        "conditions": [{**cond("Accepted"), "lastTransitionTime": T0}],
    }  # fmt: skip

    def their_write() -> None:
        """Another controller adds its entry, as ours is about to be written."""
        kube.patch(RESOURCES["HTTPRoute"].Status, "web", {"status": {"parents": [theirs]}},
                   namespace=namespace, patch_type=PatchType.MERGE)  # fmt: skip

    async def scenario(writer: GatewayStatusWriter, clock: Clock, client: Racing) -> None:
        writer.set_leader(True)
        client.race = their_write
        writer.want(route, {"parents": [our_parent("gw", namespace)]})
        # The first write is refused (the route changed since it was read: 409)
        # and retried after a fresh read, which has their entry.
        await until(lambda: len(status(kube, route).get("parents") or []) == 2, "both parents")
        parents = status(kube, route)["parents"]
        assert parents[0] == theirs
        assert parents[1]["controllerName"] == OURS
        assert parents[1]["conditions"][0]["lastTransitionTime"] == T0

        clock.now = T1
        writer.want(route, {"parents": [our_parent("gw", namespace, "False")]})
        await until(
            lambda: status(kube, route)["parents"][1]["conditions"][0]["status"] == "False",
            "ours updated",
        )
        assert status(kube, route)["parents"][1]["conditions"][0]["lastTransitionTime"] == T1
        writer.want(route, {"parents": []})  # no longer ours to report on
        await until(lambda: status(kube, route)["parents"] == [theirs], "only theirs")

    run_with_writer(apiserver, scenario)


def test_gone_objects_are_ignored_and_only_the_leader_writes(
    apiserver: APIServer, gateway_crds: None, kube: Client, namespace: str
) -> None:
    refs = objects(kube, namespace)
    gwc = refs["class"]

    async def scenario(writer: GatewayStatusWriter, clock: Clock, client: Racing) -> None:
        writer.want(gwc, {"conditions": [cond("Accepted")]})
        await asyncio.sleep(0.5)
        assert status(kube, gwc)["conditions"][0]["status"] == "Unknown"  # the CRD's default
        writer.set_leader(True)  # a new leader writes what it was told before
        await until(lambda: status(kube, gwc)["conditions"][0]["status"] == "True", "written")

        gone = ObjectRef("Gateway", namespace, "never-created")
        writer.want(gone, gateway_status())
        writer.want(gwc, {"conditions": [cond("Accepted", reason="After")]})
        await until(lambda: status(kube, gwc)["conditions"][0]["reason"] == "After", "next write")

    run_with_writer(apiserver, scenario)
