"""``ferryman migrate --to gateway-api`` for ``ssl-passthrough: "true"``: each host
of such an Ingress gets a TLS listener in Passthrough mode on port 443 and the
Ingress a TLSRoute to the Service ingress-nginx passes the host's connections
to (the rule's ``/`` path, else the defaultBackend: kinds/ingress/records/
passthrough.py reads it the same way). The HTTPRoute stays for the HTTP port,
which ingress-nginx still serves; such a host gets no HTTPS (Terminate) listener,
as ingress-nginx never ends TLS for it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ferryman.kinds.ingress.parse.ingress_nginx import PREFIX

GATEWAY_API = "gateway.networking.k8s.io/v1"
KEY = PREFIX + "ssl-passthrough"


def passes_through(annotations: Mapping[str, str]) -> bool:
    return annotations.get(KEY, "").strip().lower() == "true"


@dataclass
class Passthrough:
    """The TLS listeners, "namespace/host" of the hosts passed through, and by
    "namespace/name" each Ingress's TLSRoutes (one per host) and what kept a
    host from one."""

    listeners: list[dict[str, Any]] = field(default_factory=list)
    hosts: set[str] = field(default_factory=set)
    routes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    missing: dict[str, list[str]] = field(default_factory=dict)


def _root(spec: Mapping[str, Any], host: str) -> Mapping[str, Any] | None:
    for rule in spec.get("rules") or []:
        if rule.get("host") == host:
            for p in (rule.get("http") or {}).get("paths") or []:
                if (p.get("path") or "/") == "/":
                    backend: Mapping[str, Any] = p.get("backend") or {}
                    return backend
    default: Mapping[str, Any] | None = spec.get("defaultBackend")
    return default


def _backend_ref(backend: Mapping[str, Any]) -> dict[str, Any] | None:
    svc = backend.get("service") or {}
    number = (svc.get("port") or {}).get("number")
    return {"name": svc.get("name", ""), "port": number} if svc.get("name") and number else None


def passthrough(
    ingresses: list[Mapping[str, Any]], gateway_namespace: str, gateway_name: str
) -> Passthrough:
    out = Passthrough()
    for obj in ingresses:
        meta = obj.get("metadata") or {}
        annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
        if not passes_through(annotations):
            continue
        namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
        spec = obj.get("spec") or {}
        missing = out.missing.setdefault(f"{namespace}/{name}", [])
        routes = out.routes.setdefault(f"{namespace}/{name}", [])
        for rule in spec.get("rules") or []:
            host = rule.get("host")
            if not host:
                missing.append(f"{KEY}: a rule without a host is not passed through")
                continue
            if f"{namespace}/{host}" in out.hosts:
                continue  # the first Ingress's (ferryman serves the oldest's)
            root = _root(spec, host)
            ref = _backend_ref(root) if root is not None else None
            if ref is None:
                missing.append(
                    f"{KEY}: {host} has no '/' path or defaultBackend with a port number"
                )
                continue
            listener = f"tls-{len(out.listeners) + 1}"
            out.listeners.append(
                {
                    "name": listener,
                    "port": 443,
                    "protocol": "TLS",
                    "hostname": host,
                    "tls": {"mode": "Passthrough"},
                    "allowedRoutes": {
                        "namespaces": {"from": "All"},
                        "kinds": [{"kind": "TLSRoute"}],
                    },
                }
            )
            out.hosts.add(f"{namespace}/{host}")
            parent = {"name": gateway_name, "namespace": gateway_namespace, "sectionName": listener}
            routes.append(
                {
                    "apiVersion": GATEWAY_API,
                    "kind": "TLSRoute",
                    "metadata": {
                        "name": f"{name}-passthrough-{len(routes) + 1}",
                        "namespace": namespace,
                    },
                    "spec": {
                        "parentRefs": [parent],
                        "hostnames": [host],
                        "rules": [{"backendRefs": [ref]}],
                    },
                }
            )
    return out
