"""Gateway API's informers against the real API server with the release's CRDs:
with ``gateway_api`` the source delivers GatewayClasses, Gateways, HTTPRoutes,
ReferenceGrants (whichever version they were written in) and every Namespace
with its labels into the store under the kinds the translator reads; without
it, none of them."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lightkube import AsyncClient, Client
from lightkube.config.kubeconfig import KubeConfig
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace

from ferryman.engine.kind_spec import KindSpec, enabled
from ferryman.engine.settings import GatewaySettings, Settings
from ferryman.engine.store import Store
from ferryman.kinds import REGISTRY
from ferryman.sources.kubernetes import KubernetesSource
from testkit.apiserver import APIServer, install_crds
from testkit.gateway_environment import build as build_conformance
from testkit.gateway_kinds import RESOURCES

REFERENCE_GRANT_V1 = create_namespaced_resource(
    "gateway.networking.k8s.io", "v1", "ReferenceGrant", "referencegrants"
)
_names = itertools.count()
TENANTS = (("shop", "shop.example.com"),)


def watched(**settings: Any) -> list[KindSpec]:
    """The registered kinds these settings watch, as Kubernetes mode picks them."""
    return enabled(REGISTRY, Settings(state_dir=Path("/"), **settings))


@pytest.fixture(scope="module")
def gateway_crds(apiserver: APIServer) -> None:
    install_crds(apiserver.client(), *build_conformance().crd_files())


async def until(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def run_source(apiserver: APIServer, store: Store, gateway_api: bool, scenario: Callable[[], None],
               check: Callable[[], bool]) -> None:  # fmt: skip
    """Starts the source, waits until it synced, runs ``scenario`` (API writes),
    and waits until ``check`` holds."""

    async def go() -> None:
        client = AsyncClient(config=KubeConfig.from_file(apiserver.kubeconfig))
        source = KubernetesSource(
            client, store, kinds=watched(gateway=GatewaySettings(enabled=gateway_api))
        )
        stop = asyncio.Event()
        task = asyncio.create_task(source.run(stop))
        try:
            await asyncio.wait_for(source.wait_synced(), 60)
            await asyncio.to_thread(scenario)
            await until(check, "the store")
        finally:
            stop.set()
            task.cancel()  # its watches run until the server ends them
            await asyncio.gather(task, return_exceptions=True)
            await client.close()

    asyncio.run(go())


def test_gateway_api_kinds_and_namespaces_reach_the_store(
    apiserver: APIServer, gateway_crds: None, kube: Client, namespace: str
) -> None:
    n = next(_names)
    labelled = f"{namespace}-routes"

    def scenario() -> None:
        kube.create(Namespace(metadata=ObjectMeta(name=labelled, labels={"routes": "yes"})))
        kube.create(RESOURCES["GatewayClass"].from_dict(
            {"metadata": {"name": f"informed-{n}"}, "spec": {"controllerName": "example.com/x"}}
        ))  # fmt: skip
        kube.create(RESOURCES["Gateway"].from_dict({
            "metadata": {"name": "gw", "namespace": namespace},
            "spec": {"gatewayClassName": f"informed-{n}",
                     "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]},
        }))  # fmt: skip
        kube.create(RESOURCES["HTTPRoute"].from_dict({
            "metadata": {"name": "web", "namespace": labelled},
            "spec": {"parentRefs": [{"name": "gw", "namespace": namespace}]},
        }))  # fmt: skip
        kube.create(REFERENCE_GRANT_V1.from_dict({
            "metadata": {"name": "grant", "namespace": namespace},
            "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute",
                               "namespace": labelled}],
                     "to": [{"group": "", "kind": "Service"}]},
        }))  # fmt: skip

    store = Store()
    # Each kind has its own watch: one object delivered says nothing of the others.
    written = [
        ("GatewayClass", "", f"informed-{n}"),
        ("Gateway", namespace, "gw"),
        ("HTTPRoute", labelled, "web"),
        ("ReferenceGrant", namespace, "grant"),
        ("Namespace", "", labelled),
    ]
    run_source(apiserver, store, True, scenario, lambda: all(store.get(*k) for k in written))
    gwc = store.get("GatewayClass", "", f"informed-{n}")
    assert gwc is not None and gwc["spec"]["controllerName"] == "example.com/x"
    gw = store.get("Gateway", namespace, "gw")
    assert gw is not None and gw["metadata"]["generation"] == 1
    route = store.get("HTTPRoute", labelled, "web")
    assert route is not None and route["spec"]["parentRefs"][0]["name"] == "gw"
    grant = store.get("ReferenceGrant", namespace, "grant")
    assert grant is not None and grant["spec"]["to"] == [{"group": "", "kind": "Service"}]
    # Every namespace, with its labels; listed by kind as the translator lists them.
    ns = store.get("Namespace", "", labelled)
    assert ns is not None and ns["metadata"]["labels"]["routes"] == "yes"
    assert {"default", namespace, labelled} <= {r.name for r in store.refs("Namespace")}
    assert [r.name for r in store.refs("Gateway") if r.namespace == namespace] == ["gw"]

    # Without --enable-gateway-api none of them is watched.
    plain = Store()
    run_source(apiserver, plain, False, lambda: None, lambda: plain.count("Service") >= 0)
    for kind in ("GatewayClass", "Gateway", "HTTPRoute", "ReferenceGrant", "Namespace"):
        assert plain.count(kind) == 0, kind


def test_tenant_mode_watches_reference_grants_without_gateway_api(
    apiserver: APIServer, gateway_crds: None, kube: Client, namespace: str
) -> None:
    """--allowed-host-suffixes: a reference across namespaces needs a grant, so
    ReferenceGrants are watched, and none of Gateway API's other kinds."""

    async def go(store: Store) -> None:
        client = AsyncClient(config=KubeConfig.from_file(apiserver.kubeconfig))
        source = KubernetesSource(client, store, kinds=watched(allowed_host_suffixes=TENANTS))
        stop = asyncio.Event()
        task = asyncio.create_task(source.run(stop))
        try:
            await asyncio.wait_for(source.wait_synced(), 60)
            await asyncio.to_thread(
                kube.create,
                REFERENCE_GRANT_V1.from_dict({
                    "metadata": {"name": "tenant", "namespace": namespace},
                    "spec": {"from": [{"group": "k8s.nginx.org", "kind": "VirtualServer",
                                       "namespace": "shop"}],
                             "to": [{"group": "", "kind": "Service"}]},
                }),
            )  # fmt: skip
            await until(
                lambda: store.get("ReferenceGrant", namespace, "tenant") is not None, "grant"
            )
        finally:
            stop.set()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await client.close()

    store = Store()
    asyncio.run(go(store))
    for kind in ("GatewayClass", "Gateway", "HTTPRoute", "Namespace"):
        assert store.count(kind) == 0, kind
