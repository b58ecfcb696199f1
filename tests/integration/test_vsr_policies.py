"""Policies on VirtualServerRoute subroutes through real NGINX: a subroute
enforces its own ``policies``, else those of the VirtualServer route handing
over to it (NIC's subroute/route precedence), and NIC's vsr-route-selector-policies
example applied unchanged behaves as its README's tests say, with no reload."""

from __future__ import annotations

import base64
from typing import Any

from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    service_with_backends,
    tls_secret,
)
from testkit.nic_fixtures import NIC_EXAMPLES
from testkit.vsr_delegation import HOST, answer, vs, vsr


def _policy(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "Policy",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def _status(f: Ferryman, path: str) -> int:
    return f.get(HOST, path).status


def test_subroutes_use_their_own_policies_else_the_delegating_routes(
    ferryman: Ferryman,
) -> None:
    """/cafe delegates with a deny policy: /cafe/tea (no policies) inherits it
    (403), /cafe/coffee's own allow policy replaces it (200). / delegates with
    none: /juice's own deny policy answers 403, /water answers. Dropping the
    route's policy opens /cafe/tea with no reload."""
    f = ferryman
    deny = _policy("deny-local", accessControl={"deny": ["127.0.0.0/8"]})
    allow = _policy("let-local", accessControl={"allow": ["127.0.0.1"]})
    routes = [
        {"path": "/cafe", "route": "cafe-routes", "policies": [{"name": "deny-local"}]},
        {"path": "/", "route": "open-routes"},
    ]
    cafe = vsr(
        "cafe-routes",
        [
            {"path": "/cafe/tea", "action": answer("tea")},
            {
                "path": "/cafe/coffee",
                "action": answer("coffee"),
                "policies": [{"name": "let-local"}],
            },
        ],
    )
    open_ = vsr(
        "open-routes",
        [
            {"path": "/juice", "action": answer("juice"), "policies": [{"name": "deny-local"}]},
            {"path": "/water", "action": answer("water")},
        ],
    )
    f.write("policies", [deny, allow])
    f.write("routes", [cafe, open_])
    f.write("vs", vs(routes))
    f.start()
    assert _status(f, "/cafe/tea") == 403
    assert f.get(HOST, "/cafe/coffee").text == "coffee"
    assert _status(f, "/juice") == 403
    assert f.get(HOST, "/water").text == "water"
    routes[0].pop("policies")
    f.write("vs", vs(routes))
    eventually(lambda: _status(f, "/cafe/tea") == 200, 60, "/cafe/tea without the route's policy")
    assert _status(f, "/juice") == 403
    assert f.reloads() == 1


def _example(f: Ferryman, name: str) -> None:
    folder = "vsr-route-selector-policies"
    f.write_text(f"{folder}-{name}", (NIC_EXAMPLES / folder / name).read_text())


def test_nic_vsr_route_selector_policies(ferryman: Ferryman, backends: Backends) -> None:
    """NIC's vsr-route-selector-policies, unchanged. The Secrets its README makes
    with ``make secrets`` (api-key-client-secret in the cafe namespace, with the
    README's key "password"; tls-secret) are written here. README, step 7: the
    VS route's api-key policy reaches tea (no key: 401, a wrong one: 403, the
    right one: tea); coffee's VirtualServerRoute subroute has its own
    rate-limit policy, so it "does not inherit the API Key policy" and answers
    without a key. The README contradicts itself: step 7's opening line and
    step 8 say coffee inherits the API key policy too (step 8: "both API key
    authentication ... AND rate limiting"). NIC's code (a subroute's policies
    replace the route's, configs/virtualserver.go) gives what step 7's coffee
    test shows, asserted here: no key is needed, and the second request within
    the second is 503 (step 8's rate limit)."""
    f = ferryman
    for app in ("tea", "coffee"):
        f.write(app, service_with_backends(f"{app}-svc", [backends.start(app)]))
    f.write("tls", tls_secret("tls-secret", ["cafe.example.com"]))
    keys = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "api-key-client-secret", "namespace": "cafe"},
        "type": "nginx.org/apikey",
        "data": {"client1": base64.b64encode(b"password").decode()},
    }
    f.write("keys", keys)
    for name in (
        "cafe-namespace.yaml",
        "api-key-policy.yaml",
        "rate-limit.yaml",
        "tea-virtual-server-route.yaml",
        "coffee-virtual-server-route.yaml",
        "cafe-virtual-server.yaml",
    ):
        _example(f, name)
    f.start()
    host = "cafe.example.com"
    r = f.get(host, "/tea", https=True)
    assert r.status == 401 and "401 Authorization Required" in r.text
    r = f.get(host, "/tea", https=True, headers={"X-header-name": "wrongpassword"})
    assert r.status == 403 and "403 Forbidden" in r.text
    assert f.get(host, "/tea", https=True, headers={"X-header-name": "password"}).served_by == "tea"
    assert f.get(host, "/tea?queryName=password", https=True).served_by == "tea"
    assert f.get(host, "/coffee", https=True).served_by == "coffee"
    r = f.get(host, "/coffee", https=True, headers={"X-header-name": "password"})
    assert r.status == 503 and "503 Service Temporarily Unavailable" in r.text
    # tea has no rate limit.
    for _ in range(3):
        assert (
            f.get(host, "/tea", https=True, headers={"X-header-name": "password"}).served_by
            == "tea"
        )
    assert f.reloads() == 1
