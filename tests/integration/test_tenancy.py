"""Tenant mode (``--allowed-host-suffixes``) through real NGINX: a namespace not
allowed a host adds nothing to it through a mergeable minion or a
VirtualServerRoute, and a reference into another namespace (a Service, a Policy)
is followed only when a ReferenceGrant there allows it; a grant's creation or
removal changes what is served without a reload."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testkit.egress import Seen, _backend, _client_secret, _Peer
from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    ingress,
    path,
    rule,
    served_by,
    service_with_backends,
)

SHOP = "shop.test"
FLAG = ["--allowed-host-suffixes", "shop=shop.test,evil=evil.test"]
DENIED = "host shop.test is not allowed in namespace evil (--allowed-host-suffixes)"


def tenant(f: Ferryman) -> Ferryman:
    f.extra_args += FLAG
    return f


def last(f: Ferryman, name: str) -> dict[str, str]:
    return eventually(lambda: f.events_for(name), 60, f"{name}'s Event")[-1]


def vs(
    name: str,
    namespace: str,
    routes: list[dict[str, Any]],
    upstreams: list[dict[str, Any]] | None = None,
    policies: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"host": SHOP, "upstreams": upstreams or [], "routes": routes}
    if policies:
        spec["policies"] = policies
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def vsr(
    name: str, namespace: str, subroutes: list[dict[str, Any]], **labels: str
) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServerRoute",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "host": SHOP,
            "upstreams": [{"name": "evil", "service": "evil-svc", "port": 80}],
            "subroutes": subroutes,
        },
    }


def grant(
    namespace: str, from_kind: str, from_ns: str, to_group: str, to_kind: str
) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1beta1",
        "kind": "ReferenceGrant",
        "metadata": {"name": "allow", "namespace": namespace},
        "spec": {
            "from": [{"group": "k8s.nginx.org", "kind": from_kind, "namespace": from_ns}],
            "to": [{"group": to_group, "kind": to_kind}],
        },
    }


def test_a_minion_of_a_namespace_not_allowed_the_host_adds_nothing(
    ferryman: Ferryman, backends: Backends
) -> None:
    f = tenant(ferryman)
    f.write("shop", service_with_backends("shop-svc", [backends.start("shop")], namespace="shop"))
    f.write("evil", service_with_backends("evil-svc", [backends.start("evil")], namespace="evil"))
    mergeable = "nginx.org/mergeable-ingress-type"
    master = ingress(
        "master", [{"host": SHOP}], annotations={mergeable: "master"}, namespace="shop"
    )
    f.write("master", master)
    cart = rule(SHOP, path("/cart", "shop-svc"))
    f.write("cart", ingress("cart", [cart], annotations={mergeable: "minion"}, namespace="shop"))
    attack = rule(SHOP, path("/", "evil-svc"), path("/login", "evil-svc"))
    f.write(
        "evil", ingress("attack", [attack], annotations={mergeable: "minion"}, namespace="evil")
    )
    f.start()
    assert served_by(f, SHOP, "/cart") == "shop"
    assert served_by(f, SHOP, "/login") == "404"
    assert served_by(f, SHOP, "/") == "404"
    event = last(f, "attack")
    assert event["reason"] == "Rejected"
    assert event["message"] == f"evil/attack was rejected: {DENIED}"
    assert last(f, "cart")["reason"] == "AddedOrUpdated"


def test_a_route_of_a_namespace_not_allowed_the_host_is_not_attached(
    ferryman: Ferryman, backends: Backends
) -> None:
    f = tenant(ferryman)
    f.write("shop", service_with_backends("shop-svc", [backends.start("shop")], namespace="shop"))
    f.write("evil", service_with_backends("evil-svc", [backends.start("evil")], namespace="evil"))
    routes = [
        {"path": "/cart", "action": {"pass": "shop"}},
        {"path": "/login", "routeSelector": {"matchLabels": {"team": "shop"}}},
        {"path": "/admin", "route": "evil/named"},
    ]
    upstreams = [{"name": "shop", "service": "shop-svc", "port": 80}]
    f.write("vs", vs("cafe", "shop", routes, upstreams))
    login = [{"path": "/login", "action": {"pass": "evil"}}]
    f.write("selected", vsr("selected", "evil", login, team="shop"))
    f.write("named", vsr("named", "evil", [{"path": "/admin", "action": {"pass": "evil"}}]))
    f.start()
    assert served_by(f, SHOP, "/cart") == "shop"
    assert served_by(f, SHOP, "/login") == "404"
    assert served_by(f, SHOP, "/admin") == "404"
    for name in ("selected", "named"):
        event = last(f, name)
        assert event["reason"] == "Rejected"
        assert (
            event["message"] == f"VirtualServerRoute evil/{name} was rejected with error: {DENIED}"
        )
    warned = eventually(
        lambda: last(f, "cafe")["reason"] == "AddedOrUpdatedWithWarning", 60, "warned"
    )
    assert warned
    message = last(f, "cafe")["message"]
    for name in ("selected", "named"):
        assert f"VirtualServerRoute evil/{name} is invalid: {DENIED}" in message


def test_a_service_of_another_namespace_needs_a_reference_grant(
    ferryman: Ferryman, backends: Backends
) -> None:
    f = tenant(ferryman)
    svc = service_with_backends("internal", [backends.start("internal")], namespace="billing")
    f.write("billing", svc)
    upstreams = [{"name": "in", "service": "billing/internal", "port": 80}]
    f.write("vs", vs("cafe", "shop", [{"path": "/", "action": {"pass": "in"}}], upstreams))
    f.start()
    # Refused: as a Service that does not exist (ferryman's 503 for an upstream
    # without endpoints).
    assert served_by(f, SHOP, "/") == "503"
    event = last(f, "cafe")
    assert event["reason"] == "AddedOrUpdatedWithWarning"
    assert (
        "spec.upstreams[0].service: Service billing/internal is in another namespace: "
        "--allowed-host-suffixes needs a ReferenceGrant in namespace billing from "
        '{group: k8s.nginx.org, kind: VirtualServer, namespace: shop} to {group: "", '
        "kind: Service, name: internal} (name optional)"
    ) in event["message"]
    f.write("grant", grant("billing", "VirtualServer", "shop", "", "Service"))
    eventually(lambda: served_by(f, SHOP, "/") == "internal", 60, "granted")
    eventually(lambda: last(f, "cafe")["reason"] == "AddedOrUpdated", 60, "no warning")
    f.remove("grant")
    eventually(lambda: served_by(f, SHOP, "/") == "503", 60, "grant withdrawn")
    assert f.reloads() == 1


def test_a_policy_of_another_namespace_needs_a_reference_grant(
    ferryman: Ferryman, tmp_path: Path
) -> None:
    f = tenant(ferryman)
    seen = Seen()
    httpd = _backend(tmp_path, seen)
    try:
        peer = _Peer(int(httpd.server_address[1]))
        f.write("svc", service_with_backends("app", [peer], namespace="shop"))
        secret = _client_secret("billing-cert", "billing")
        secret["metadata"]["namespace"] = "billing"
        f.write("secret", secret)
        policy = {
            "apiVersion": "k8s.nginx.org/v1",
            "kind": "Policy",
            "metadata": {"name": "as-billing", "namespace": "billing"},
            "spec": {"egressMTLS": {"tlsSecret": "billing-cert"}},
        }
        f.write("policy", policy)
        upstreams = [{"name": "up", "service": "app", "port": 80, "tls": {"enable": True}}]
        routes = [{"path": "/", "action": {"pass": "up"}}]
        refs = [{"name": "as-billing", "namespace": "billing"}]
        f.write("vs", vs("cafe", "shop", routes, upstreams, refs))
        f.start()
        # Refused as a missing Policy is (NIC: the context answers 500): the
        # backend never sees billing's certificate.
        assert f.get(SHOP, "/").status == 500
        assert seen.client == []
        message = last(f, "cafe")["message"]
        assert "Policy billing/as-billing is refused: Policy billing/as-billing is in another" in (
            message
        )
        assert "to {group: k8s.nginx.org, kind: Policy, name: as-billing}" in message
        f.write("grant", grant("billing", "VirtualServer", "shop", "k8s.nginx.org", "Policy"))
        eventually(lambda: f.get(SHOP, "/").status == 200, 60, "granted")
        assert seen.client[-1] == "billing"
        assert f.reloads() == 1
    finally:
        httpd.shutdown()
        httpd.server_close()
