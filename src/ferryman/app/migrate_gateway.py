"""``ferryman migrate --to gateway-api``: Ingresses written for ingress-nginx as
Gateway API objects. One Gateway for the class (an HTTP listener open to every
namespace), one HTTPRoute per Ingress; each annotation Gateway API has a filter
for becomes that filter, and everything else is listed as not expressed, never
dropped silently. A weighted canary Ingress becomes weighted backendRefs in
its main Ingress's route."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ferryman.kinds.ingress.parse.ingress_nginx import PREFIX

GATEWAY_API = "gateway.networking.k8s.io/v1"
# Annotations this module turns into Gateway API fields.
_EXPRESSED = frozenset(
    {
        "rewrite-target",
        "ssl-redirect",
        "force-ssl-redirect",
        "permanent-redirect",
        "permanent-redirect-code",
        "upstream-vhost",
        "x-forwarded-prefix",
        "proxy-read-timeout",
        "canary",
        "canary-weight",
        "use-regex",
    }
)


@dataclass
class Converted:
    objects: list[dict[str, Any]] = field(default_factory=list)
    # "namespace/name" -> what could not be expressed
    not_expressed: dict[str, list[str]] = field(default_factory=dict)


def _meta(obj: Mapping[str, Any]) -> tuple[str, str, dict[str, str]]:
    meta = obj.get("metadata") or {}
    annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
    return str(meta.get("namespace") or "default"), str(meta.get("name") or ""), annotations


def _backend(raw: Mapping[str, Any], namespace: str, missing: list[str]) -> dict[str, Any]:
    svc = (raw or {}).get("service") or {}
    port = svc.get("port") or {}
    ref: dict[str, Any] = {"name": svc.get("name", "")}
    if "number" in port:
        ref["port"] = port["number"]
    else:
        missing.append(
            f"Service {svc.get('name')} port {port.get('name')!r}: a port number is needed"
        )
    return ref


def _filters(a: Mapping[str, str], missing: list[str]) -> list[dict[str, Any]]:
    def get(key: str) -> str | None:
        return a.get(PREFIX + key)

    out: list[dict[str, Any]] = []
    if (url := get("permanent-redirect")) is not None:
        parts = urlsplit(url)
        redirect: dict[str, Any] = {"statusCode": int(get("permanent-redirect-code") or 301)}
        if parts.scheme in ("http", "https"):
            redirect["scheme"] = parts.scheme
        if parts.hostname:
            redirect["hostname"] = parts.hostname
        if parts.path:
            redirect["path"] = {"type": "ReplaceFullPath", "replaceFullPath": parts.path}
        return [{"type": "RequestRedirect", "requestRedirect": redirect}]
    if (get("ssl-redirect") or "").lower() == "true" or (
        get("force-ssl-redirect") or ""
    ).lower() == "true":
        # The route is attached to the HTTP listener: every request there is redirected.
        return [
            {"type": "RequestRedirect", "requestRedirect": {"scheme": "https", "statusCode": 308}}
        ]
    if (target := get("rewrite-target")) is not None:
        if "$" in target:
            missing.append(f"{PREFIX}rewrite-target {target!r}: capture groups have no filter")
        else:
            out.append(
                {
                    "type": "URLRewrite",
                    "urlRewrite": {
                        "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": target}
                    },
                }
            )
    headers = []
    if (vhost := get("upstream-vhost")) is not None:
        headers.append({"name": "Host", "value": vhost})
    if (prefix := get("x-forwarded-prefix")) is not None:
        headers.append({"name": "X-Forwarded-Prefix", "value": prefix})
    if headers:
        out.append({"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": headers}})
    return out


_PATH_TYPE = {"Exact": "Exact", "Prefix": "PathPrefix", "ImplementationSpecific": "PathPrefix"}
_REGEX = re.compile(r"[\^$()\[\]*+?{}|\\]")


def _route(
    obj: Mapping[str, Any], gateway: tuple[str, str], weights: Mapping[str, tuple[str, int, int]]
) -> tuple[dict[str, Any], list[str]]:
    namespace, name, a = _meta(obj)
    spec = obj.get("spec") or {}
    missing = [
        f"{k}: no Gateway API equivalent here"
        for k in sorted(a)
        if k.startswith(PREFIX) and k.removeprefix(PREFIX) not in _EXPRESSED
    ]
    if spec.get("tls"):
        missing.append("spec.tls: add an HTTPS listener with these certificateRefs to the Gateway")
    regex = a.get(PREFIX + "use-regex") == "true" or "$" in a.get(PREFIX + "rewrite-target", "")
    filters = _filters(a, missing)
    rules: list[dict[str, Any]] = []
    hostnames: list[str] = []
    for rule in spec.get("rules") or []:
        if rule.get("host") and rule["host"] not in hostnames:
            hostnames.append(rule["host"])
        for p in (rule.get("http") or {}).get("paths") or []:
            path = p.get("path") or "/"
            kind = _PATH_TYPE.get(p.get("pathType", "Prefix"), "PathPrefix")
            if regex and _REGEX.search(path):
                kind = "RegularExpression"
            backend = _backend(p.get("backend") or {}, namespace, missing)
            backends = [backend]
            if (canary := weights.get(f"{namespace}/{rule.get('host', '')}/{path}")) is not None:
                service, port, weight = canary
                backend["weight"] = 100 - weight
                backends.append({"name": service, "port": port, "weight": weight})
            r: dict[str, Any] = {
                "matches": [{"path": {"type": kind, "value": path}}],
                "backendRefs": backends,
            }
            if filters:
                r["filters"] = filters
            if (t := a.get(PREFIX + "proxy-read-timeout", "")).isdigit():
                r["timeouts"] = {"backendRequest": f"{int(t)}s"}
            rules.append(r)
    if spec.get("defaultBackend"):
        rules.append({"backendRefs": [_backend(spec["defaultBackend"], namespace, missing)]})
    route: dict[str, Any] = {
        "apiVersion": GATEWAY_API,
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "parentRefs": [{"name": gateway[1], "namespace": gateway[0]}],
            "rules": rules,
        },
    }
    if hostnames:
        route["spec"]["hostnames"] = hostnames
    return route, missing


def _canaries(
    ingresses: list[Mapping[str, Any]],
) -> tuple[dict[str, tuple[str, int, int]], set[str]]:
    """Weighted canaries: "namespace/host/path" -> (Service, port, weight), and the
    canary Ingresses folded into their main one's route."""
    weights: dict[str, tuple[str, int, int]] = {}
    folded: set[str] = set()
    for obj in ingresses:
        namespace, name, a = _meta(obj)
        weight = a.get(PREFIX + "canary-weight", "")
        if a.get(PREFIX + "canary") != "true" or not weight.isdigit():
            continue
        for rule in (obj.get("spec") or {}).get("rules") or []:
            for p in (rule.get("http") or {}).get("paths") or []:
                svc = (p.get("backend") or {}).get("service") or {}
                port = (svc.get("port") or {}).get("number")
                if isinstance(port, int):
                    key = f"{namespace}/{rule.get('host', '')}/{p.get('path') or '/'}"
                    weights[key] = (svc.get("name", ""), port, min(int(weight), 100))
                    folded.add(f"{namespace}/{name}")
    return weights, folded


def convert(
    ingresses: list[Mapping[str, Any]], class_name: str = "nginx", namespace: str = "default"
) -> Converted:
    """A Gateway named after the class and one HTTPRoute per Ingress."""
    out = Converted()
    out.objects.append(
        {
            "apiVersion": GATEWAY_API,
            "kind": "Gateway",
            "metadata": {"name": class_name, "namespace": namespace},
            "spec": {
                "gatewayClassName": "ferryman",
                "listeners": [
                    {
                        "name": "http",
                        "port": 80,
                        "protocol": "HTTP",
                        "allowedRoutes": {"namespaces": {"from": "All"}},
                    }
                ],
            },
        }
    )
    weights, folded = _canaries(ingresses)
    for obj in ingresses:
        ns, name, a = _meta(obj)
        key = f"{ns}/{name}"
        if key in folded:
            out.not_expressed[key] = ["canary: a weighted backendRef of its main Ingress's route"]
            continue
        route, missing = _route(obj, (namespace, class_name), weights)
        if a.get(PREFIX + "canary") == "true":
            missing.append("canary without a weight (by header/cookie): a route of its own")
        out.objects.append(route)
        out.not_expressed[key] = missing
    return out
