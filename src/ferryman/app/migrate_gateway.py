"""``ferryman migrate --to gateway-api``: Ingresses written for ingress-nginx as
Gateway API objects. One Gateway for the class (an HTTP listener open to every
namespace), one HTTPRoute per Ingress; each annotation Gateway API has a filter
for becomes that filter, and everything else is listed as not expressed, never
dropped silently. A canary Ingress is folded into its main Ingress's route
(``migrate_gateway_canary``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ferryman.app.migrate_gateway_canary import GatewayCanary, canaries, canary_rules
from ferryman.app.migrate_gateway_passthrough import passthrough
from ferryman.kinds.gateway.parse.gateway_api import parse_http_route
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
        "canary-weight-total",
        "canary-by-header",
        "canary-by-header-value",
        "canary-by-header-pattern",
        "canary-by-cookie",
        "use-regex",
        "ssl-passthrough",
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


def _backend(raw: Mapping[str, Any], missing: list[str]) -> dict[str, Any]:
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


def _redirect(a: Mapping[str, str]) -> dict[str, Any] | None:
    """permanent-redirect's filter: every request of the Ingress answered with it."""
    if (url := a.get(PREFIX + "permanent-redirect")) is None:
        return None
    parts = urlsplit(url)
    code = a.get(PREFIX + "permanent-redirect-code", "301")
    redirect: dict[str, Any] = {"statusCode": int(code) if code.isdigit() else 301}
    if parts.scheme in ("http", "https"):
        redirect["scheme"] = parts.scheme
    if parts.hostname:
        redirect["hostname"] = parts.hostname
    if parts.path:
        redirect["path"] = {"type": "ReplaceFullPath", "replaceFullPath": parts.path}
    return {"type": "RequestRedirect", "requestRedirect": redirect}


def _filters(a: Mapping[str, str], missing: list[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if (target := a.get(PREFIX + "rewrite-target")) is not None:
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
    if (vhost := a.get(PREFIX + "upstream-vhost")) is not None:
        headers.append({"name": "Host", "value": vhost})
    if (prefix := a.get(PREFIX + "x-forwarded-prefix")) is not None:
        headers.append({"name": "X-Forwarded-Prefix", "value": prefix})
    if headers:
        out.append({"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": headers}})
    return out


def _ssl_redirect(a: Mapping[str, str], tls: bool, missing: list[str]) -> bool:
    """ingress-nginx redirects HTTP to HTTPS when the Ingress has TLS (ssl-redirect,
    default true) or always (force-ssl-redirect)."""
    ssl = a.get(PREFIX + "ssl-redirect", "true").lower() == "true"
    force = a.get(PREFIX + "force-ssl-redirect", "false").lower() == "true"
    if force and not tls:
        missing.append(f"{PREFIX}force-ssl-redirect without spec.tls: no HTTPS listener here")
        return False
    return tls and (ssl or force)


_PATH_TYPE = {"Exact": "Exact", "Prefix": "PathPrefix", "ImplementationSpecific": "PathPrefix"}
_REGEX = re.compile(r"[\^$()\[\]*+?{}|\\]")


@dataclass(frozen=True)
class _Gateway:
    namespace: str
    name: str
    # "namespace/host" -> the HTTPS listener serving it
    https: Mapping[str, str]


def _path_rules(
    obj: Mapping[str, Any],
    filters: list[dict[str, Any]],
    weights: Mapping[str, GatewayCanary],
    missing: list[str],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """A route rule per Ingress path (no backends when a filter redirects), the
    matches, and the hostnames."""
    namespace, _, a = _meta(obj)
    regex = a.get(PREFIX + "use-regex") == "true" or "$" in a.get(PREFIX + "rewrite-target", "")
    redirects = any(f["type"] == "RequestRedirect" for f in filters)
    timeout = a.get(PREFIX + "proxy-read-timeout", "")
    rules: list[dict[str, Any]] = []
    matches: list[dict[str, Any]] = []
    hostnames: list[str] = []
    for rule in (obj.get("spec") or {}).get("rules") or []:
        if rule.get("host") and rule["host"] not in hostnames:
            hostnames.append(rule["host"])
        for p in (rule.get("http") or {}).get("paths") or []:
            path = p.get("path") or "/"
            kind = _PATH_TYPE.get(p.get("pathType", "Prefix"), "PathPrefix")
            if regex and _REGEX.search(path):
                kind = "RegularExpression"
            match = {"path": {"type": kind, "value": path}}
            matches.append(match)
            r: dict[str, Any] = {"matches": [match]}
            if filters:
                r["filters"] = filters
            if not redirects:
                backend = _backend(p.get("backend") or {}, missing)
                r["backendRefs"] = [backend]
                if timeout.isdigit():
                    r["timeouts"] = {"backendRequest": f"{int(timeout)}s"}
                key = f"{namespace}/{rule.get('host', '')}/{path}"
                if (canary := weights.get(key)) is not None:
                    rules += canary_rules(r, backend, canary, missing)
                    continue
            rules.append(r)
    return rules, matches, hostnames


def _route(
    obj: Mapping[str, Any], gateway: _Gateway, weights: Mapping[str, GatewayCanary]
) -> tuple[list[dict[str, Any]], list[str]]:
    """The Ingress's HTTPRoute (and one redirecting HTTP to HTTPS), and what is
    not expressed."""
    namespace, name, a = _meta(obj)
    spec = obj.get("spec") or {}
    missing = [
        f"{k}: no Gateway API equivalent here"
        for k in sorted(a)
        if k.startswith(PREFIX) and k.removeprefix(PREFIX) not in _EXPRESSED
    ]
    filters = _filters(a, missing)
    if (redirect := _redirect(a)) is not None:
        if filters:
            missing.append("permanent-redirect answers every request: the other filters dropped")
        filters = [redirect]
    rules, matches, hostnames = _path_rules(obj, filters, weights, missing)
    if spec.get("defaultBackend") and redirect is None:
        rules.append({"backendRefs": [_backend(spec["defaultBackend"], missing)]})
    tls_hosts = [h for t in spec.get("tls") or [] for h in t.get("hosts") or []]
    if spec.get("tls") and not tls_hosts:
        missing.append("spec.tls without hosts: an HTTPS listener needs a hostname")
    parent = {"name": gateway.name, "namespace": gateway.namespace}
    routes = [_http_route(namespace, name, [parent], hostnames, rules)]
    listeners = sorted({gateway.https.get(f"{namespace}/{h}", "") for h in tls_hosts} - {""})
    if redirect is None and listeners and _ssl_redirect(a, bool(tls_hosts), missing):
        routes[0]["spec"]["parentRefs"] = [{**parent, "sectionName": n} for n in listeners]
        to_https = {
            "type": "RequestRedirect",
            "requestRedirect": {"scheme": "https", "statusCode": 308},
        }
        routes.append(
            _http_route(
                namespace,
                f"{name}-redirect",
                [{**parent, "sectionName": "http"}],
                hostnames,
                [{"matches": [m], "filters": [to_https]} for m in matches]
                or [{"filters": [to_https]}],
            )
        )
    return routes, missing


def _http_route(
    namespace: str,
    name: str,
    parents: list[dict[str, Any]],
    hostnames: list[str],
    rules: list[dict[str, Any]],
) -> dict[str, Any]:
    spec: dict[str, Any] = {"parentRefs": parents}
    if hostnames:
        spec["hostnames"] = hostnames
    spec["rules"] = rules
    return {
        "apiVersion": GATEWAY_API,
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def _listeners(
    ingresses: list[Mapping[str, Any]], gateway_namespace: str, passed: set[str]
) -> tuple[list[dict[str, Any]], dict[str, str], list[dict[str, Any]]]:
    """An HTTPS listener per TLS host (its Secret in the Ingress's namespace, a
    ReferenceGrant letting the Gateway read it), and "namespace/host" -> listener;
    none for the hosts ``passed`` through ("namespace/host")."""
    listeners: list[dict[str, Any]] = []
    by_host: dict[str, str] = {}
    granted: dict[str, dict[str, Any]] = {}
    seen_hosts: set[str] = set()
    for obj in ingresses:
        namespace, _, _ = _meta(obj)
        for t in (obj.get("spec") or {}).get("tls") or []:
            secret = t.get("secretName")
            for host in t.get("hosts") or []:
                if not secret or host in seen_hosts or f"{namespace}/{host}" in passed:
                    continue  # one listener per host (the first Ingress's Secret)
                seen_hosts.add(host)
                listener = f"https-{len(listeners) + 1}"
                ref: dict[str, Any] = {"name": secret}
                if namespace != gateway_namespace:
                    ref["namespace"] = namespace
                    granted.setdefault(namespace, _grant(namespace, gateway_namespace))
                listeners.append(
                    {
                        "name": listener,
                        "port": 443,
                        "protocol": "HTTPS",
                        "hostname": host,
                        "tls": {"mode": "Terminate", "certificateRefs": [ref]},
                        "allowedRoutes": {"namespaces": {"from": "All"}},
                    }
                )
                by_host[f"{namespace}/{host}"] = listener
    return listeners, by_host, list(granted.values())


def _grant(namespace: str, gateway_namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1beta1",
        "kind": "ReferenceGrant",
        "metadata": {"name": "gateway-secrets", "namespace": namespace},
        "spec": {
            "from": [
                {
                    "group": "gateway.networking.k8s.io",
                    "kind": "Gateway",
                    "namespace": gateway_namespace,
                }
            ],
            "to": [{"group": "", "kind": "Secret"}],
        },
    }


def convert(
    ingresses: list[Mapping[str, Any]], class_name: str = "nginx", namespace: str = "default"
) -> Converted:
    """A Gateway named after the class (HTTP, and HTTPS per TLS host), the
    ReferenceGrants its certificates need, and the Ingresses' HTTPRoutes."""
    out = Converted()
    passed = passthrough(ingresses, namespace, class_name)
    https, by_host, grants = _listeners(ingresses, namespace, passed.hosts)
    http = {
        "name": "http",
        "port": 80,
        "protocol": "HTTP",
        "allowedRoutes": {"namespaces": {"from": "All"}},
    }
    out.objects.append(
        {
            "apiVersion": GATEWAY_API,
            "kind": "Gateway",
            "metadata": {"name": class_name, "namespace": namespace},
            "spec": {
                "gatewayClassName": "ferryman",
                "listeners": [http, *https, *passed.listeners],
            },
        }
    )
    out.objects += grants
    weights, folded = canaries(ingresses)
    gateway = _Gateway(namespace, class_name, by_host)
    for obj in ingresses:
        ns, name, a = _meta(obj)
        key = f"{ns}/{name}"
        if key in folded:
            out.not_expressed[key] = [
                "canary: folded into its main Ingress's route (header rules, weighted backendRefs)"
            ]
            continue
        routes, missing = _route(obj, gateway, weights)
        if a.get(PREFIX + "canary") == "true":
            missing.append("canary without a path of a port number: a route of its own")
        for route in routes:
            # Written only when ferryman's own parser takes it (a path ingress-nginx
            # read as a regular expression may be no Gateway API path).
            parsed = parse_http_route(route)
            if parsed.problems:
                problems = "; ".join(str(p) for p in parsed.problems)
                missing.append(f"HTTPRoute {route['metadata']['name']} not written: {problems}")
            else:
                out.objects.append(route)
        out.objects += passed.routes.get(key, [])
        out.not_expressed[key] = missing + passed.missing.get(key, [])
    return out
