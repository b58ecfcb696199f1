"""Tenant mode's references across namespaces (configs/tenancy.py, reads.Reads.granted):
which ReferenceGrant allows which reference, that a grant's change translates its
readers again (with and without Gateway API's own translator), and that outside
tenant mode nothing is refused."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ferryman.configs.tenancy import POLICY, REFUSED, SERVICE, check
from ferryman.engine.dependencies import ANY
from ferryman.engine.kind_spec import enabled
from ferryman.engine.reads import Cache, Reads
from ferryman.engine.secrets import SecretStore
from ferryman.engine.settings import GatewaySettings, Settings
from ferryman.engine.store import Store
from ferryman.kinds import REGISTRY
from ferryman.resources.meta import ObjectRef
from ferryman.sources.kubernetes import KubernetesSource
from testkit.controller_kit import Kit
from testkit.harness import ingress, path, rule

TENANTS = (("shop", "shop.test"), ("billing", "billing.test"))


def grant(
    namespace: str,
    from_kind: str = "VirtualServer",
    from_ns: str = "shop",
    to: tuple[str, str] = SERVICE,
    name: str | None = None,
    group: str = "k8s.nginx.org",
) -> dict[str, Any]:
    target: dict[str, str] = {"group": to[0], "kind": to[1]}
    if name:
        target["name"] = name
    return {
        "apiVersion": "gateway.networking.k8s.io/v1beta1",
        "kind": "ReferenceGrant",
        "metadata": {"name": "allow", "namespace": namespace},
        "spec": {
            "from": [{"group": group, "kind": from_kind, "namespace": from_ns}],
            "to": [target],
        },
    }


def reads(tmp: Path, *objs: dict[str, Any], tenant: bool = True) -> Reads:
    store = Store()
    for o in objs:
        store.upsert(o)
    settings = Settings(state_dir=tmp, allowed_host_suffixes=TENANTS if tenant else ())
    return Reads(Cache(store, SecretStore(), settings))


def test_a_grant_allows_exactly_what_it_names(tmp_path: Path) -> None:
    r = reads(tmp_path, grant("billing", to=SERVICE, name="internal"))
    assert r.granted("VirtualServer", "shop", SERVICE, "billing", "internal")
    assert not r.granted("VirtualServer", "shop", SERVICE, "billing", "other")
    assert not r.granted("VirtualServerRoute", "shop", SERVICE, "billing", "internal")
    assert not r.granted("VirtualServer", "evil", SERVICE, "billing", "internal")
    assert not r.granted("VirtualServer", "shop", POLICY, "billing", "internal")
    assert r.refs == {ObjectRef("ReferenceGrant", "billing", ANY)}


def test_an_ingress_grant_names_its_own_group(tmp_path: Path) -> None:
    nic = grant("billing", "Ingress", to=POLICY)
    networking = grant("billing", "Ingress", to=POLICY, group="networking.k8s.io")
    assert not reads(tmp_path, nic).granted("Ingress", "shop", POLICY, "billing", "p")
    assert reads(tmp_path, networking).granted("Ingress", "shop", POLICY, "billing", "p")


def test_outside_tenant_mode_and_within_a_namespace_nothing_is_refused(tmp_path: Path) -> None:
    r = reads(tmp_path, tenant=False)
    assert check(r, "VirtualServer", "shop", SERVICE, "billing", "internal") is None
    assert r.refs == set()
    tenant = reads(tmp_path)
    assert check(tenant, "VirtualServer", "shop", SERVICE, "shop", "internal") is None
    refused = check(tenant, "VirtualServer", "shop", SERVICE, "billing", "internal")
    assert refused == (
        "Service billing/internal is in another namespace: --allowed-host-suffixes needs a "
        "ReferenceGrant in namespace billing from {group: k8s.nginx.org, kind: VirtualServer, "
        'namespace: shop} to {group: "", kind: Service, name: internal} (name optional)'
    )


NAMES = st.sampled_from(["shop", "billing", "evil"])


@given(
    from_ns=NAMES,
    to_ns=NAMES,
    grant_ns=NAMES,
    grant_from=NAMES,
    kind=st.sampled_from(["VirtualServer", "VirtualServerRoute", "Policy"]),
    to=st.sampled_from([SERVICE, POLICY]),
)
def test_granted_iff_same_namespace_or_a_matching_grant_in_the_target(
    tmp_path_factory: Any,
    from_ns: str,
    to_ns: str,
    grant_ns: str,
    grant_from: str,
    kind: str,
    to: tuple[str, str],
) -> None:
    tmp = tmp_path_factory.mktemp("g")
    r = reads(tmp, grant(grant_ns, kind, grant_from, SERVICE))
    expected = from_ns == to_ns or (grant_ns == to_ns and grant_from == from_ns and to == SERVICE)
    assert r.granted(kind, from_ns, to, to_ns, "x") == expected


def _vs(service: str) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": {"name": "cafe", "namespace": "shop"},
        "spec": {
            "host": "shop.test",
            "upstreams": [{"name": "in", "service": service, "port": 80}],
            "routes": [{"path": "/", "action": {"pass": "in"}}],
        },
    }


def _record(kit: Kit) -> str:
    return kit.dataplane.records[("V", "shop.test")]


def test_a_grant_change_translates_its_readers_again(tmp_path: Path) -> None:
    for gateway_api in (False, True):  # Gateway API's translator reads grants too
        kit = Kit(
            tmp_path / str(gateway_api),
            allowed_host_suffixes=TENANTS,
            gateway=GatewaySettings(enabled=gateway_api),
        )
        kit.add(_vs("billing/internal"))
        asyncio.run(kit.drain())
        assert REFUSED in _record(kit)
        kit.add(grant("billing"))
        asyncio.run(kit.drain())
        assert "billing/internal:80" in _record(kit)
        assert kit.reasons("cafe")[-1] == "AddedOrUpdated"
        kit.sink.delete(ObjectRef("ReferenceGrant", "billing", "allow"))
        asyncio.run(kit.drain())
        assert REFUSED in _record(kit)
        assert kit.reasons("cafe")[-1] == "AddedOrUpdatedWithWarning"


def _policy(name: str, namespace: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "Policy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def test_an_ingress_policy_of_another_namespace_needs_a_grant(tmp_path: Path) -> None:
    kit = Kit(tmp_path, allowed_host_suffixes=TENANTS)
    allow = _policy("allow", "billing", {"accessControl": {"allow": ["10.0.0.0/8"]}})
    ing = ingress("shop", [rule("shop.test", path("/", "app"))], namespace="shop")
    ing["metadata"]["annotations"] = {"nginx.org/policies": "billing/allow"}
    kit.add(allow, ing)
    asyncio.run(kit.drain())
    assert kit.reasons("shop")[-1] == "AddedOrUpdatedWithWarning"
    assert (
        "Policy billing/allow is refused: Policy billing/allow is in another"
        in (kit.messages("shop")[-1])
    )
    assert (
        "from {group: networking.k8s.io, kind: Ingress, namespace: shop}"
        in (kit.messages("shop")[-1])
    )
    kit.add(grant("billing", "Ingress", to=POLICY, group="networking.k8s.io"))
    asyncio.run(kit.drain())
    assert kit.reasons("shop")[-1] == "AddedOrUpdated"


def test_an_external_auth_service_of_another_namespace_needs_a_grant(tmp_path: Path) -> None:
    kit = Kit(tmp_path, allowed_host_suffixes=TENANTS)
    auth = {"externalAuth": {"authURI": "/auth", "authServiceName": "billing/auth"}}
    vs = _vs("app")
    vs["spec"]["policies"] = [{"name": "ext"}]
    kit.add(_policy("ext", "shop", auth), vs)
    asyncio.run(kit.drain())
    assert kit.reasons("cafe")[-1] == "AddedOrUpdatedWithWarning"
    message = kit.messages("cafe")[-1]
    assert "ExternalAuth policy shop/ext: Service billing/auth is in another namespace" in message
    assert "from {group: k8s.nginx.org, kind: Policy, namespace: shop}" in message
    assert "billing/auth:80" not in _record(kit)
    kit.add(grant("billing", "Policy", to=SERVICE))
    asyncio.run(kit.drain())
    assert kit.reasons("cafe")[-1] == "AddedOrUpdated"
    assert "billing/auth:80" in _record(kit)


def test_kubernetes_mode_watches_grants_in_tenant_mode() -> None:
    tenants = (("team-a", "a.example.com"),)

    def kinds(**settings: Any) -> list[str]:
        watched = enabled(REGISTRY, Settings(state_dir=Path("/"), **settings))
        source = KubernetesSource(None, None, kinds=watched)  # type: ignore[arg-type]
        return [k.key for k in source._kinds if k.key == "ReferenceGrant"]

    assert kinds() == []
    assert kinds(allowed_host_suffixes=tenants) == ["ReferenceGrant"]
    assert kinds(allowed_host_suffixes=tenants, gateway=GatewaySettings(enabled=True)) == [
        "ReferenceGrant"
    ]
