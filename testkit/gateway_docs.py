"""Gateway API documents (GatewayClass, Gateway, HTTPRoute) and requests to a Gateway's address.

Moved from tests/integration/test_gateway_api.py, whose tests and others share them."""

from __future__ import annotations

from typing import Any

import httpx

from testkit.harness import (
    Response,
    _insecure_context,
)


def gateway_class() -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "GatewayClass",
        "metadata": {"name": "ferryman"},
        "spec": {"controllerName": "ferryman.io/gateway-controller"},
    }


def gateway(name: str, listeners: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"gatewayClassName": "ferryman", "listeners": listeners, **spec},
    }


def route(
    name: str, parent: str, hostnames: list[str], rules: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"parentRefs": [{"name": parent}], "hostnames": hostnames, "rules": rules},
    }


def to(service: str, path: str = "/", kind: str = "PathPrefix") -> dict[str, Any]:
    return {
        "matches": [{"path": {"type": kind, "value": path}}],
        "backendRefs": [{"name": service, "port": 80}],
    }


def get_at(
    address: str,
    port: int,
    host: str,
    path: str = "/",
    *,
    https: bool = False,
    headers: dict[str, str] | None = None,
) -> Response:
    scheme = "https" if https else "http"
    ext = {"sni_hostname": host} if https else {}
    with httpx.Client(verify=_insecure_context(), timeout=10) as c:
        req = c.build_request(
            "GET",
            f"{scheme}://{address}:{port}{path}",
            headers={**(headers or {}), "Host": host},
            extensions=ext,
        )
        r = c.send(req, follow_redirects=False)
    return Response(r.status_code, r.headers, r.text)


def served(address: str, port: int, host: str, path: str = "/", **kw: Any) -> str | None:
    r = get_at(address, port, host, path, **kw)
    return r.served_by if r.status == 200 else str(r.status)
