"""k8s.nginx.org/v1 VirtualServer: typed view and NIC's validation.

``kinds/virtualserver/records/virtualserver.py`` turns one into the records the Lua router serves.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ferryman.kinds.virtualserver.parse.route import (
    Route,
    RouteRef,
    parse_policy_refs,
    parse_routes,
    split_path,
)
from ferryman.resources import nic_rules as rules
from ferryman.resources.cert_manager import CertManager, parse_cert_manager
from ferryman.resources.meta import Meta
from ferryman.resources.nic_fields import (
    Context,
    Obj,
    Parsed,
    invalid,
    not_supported,
    parse_object_meta,
    required,
)
from ferryman.resources.nic_upstream import Upstream, parse_upstreams
from ferryman.resources.policy_ref import PolicyRef

KIND = "VirtualServer"
SPEC_KEYS = frozenset(
    [
        "ingressClassName",
        "host",
        "listener",
        "tls",
        "gunzip",
        "policies",
        "upstreams",
        "routes",
        "http-snippets",
        "server-snippets",
        "add-header-inherit",
        "dos",
        "externalDNS",
    ]
)
TLS_KEYS = frozenset({"secret", "redirect", "cert-manager"})
LISTENER_KEYS = frozenset({"http", "https"})
_SNIPPETS = "snippets are raw NGINX configuration, which ferryman never accepts from a resource"
_NOT_SUPPORTED = {
    "gunzip": "decompressing responses is not implemented",
    "http-snippets": _SNIPPETS,
    "server-snippets": _SNIPPETS,
    "add-header-inherit": "NGINX's add_header_inherit is not used by ferryman",
    "dos": "NGINX App Protect DoS needs NGINX Plus",
    "externalDNS": "ferryman does not publish DNS records",
}


@dataclass(frozen=True)
class TLSRedirect:
    code: int = 301
    based_on: str = "scheme"  # or "x-forwarded-proto"


@dataclass(frozen=True)
class TLS:
    secret: str  # "" terminates no TLS (NIC allows a tls block without a secret)
    redirect: TLSRedirect | None = None
    cert_manager: CertManager | None = None  # the Certificate to make (--enable-cert-manager)


@dataclass(frozen=True)
class Listeners:
    """spec.listener: the GlobalConfiguration HTTP listeners (names; "" for
    none) the host is served on instead of the default ports. NIC validates
    the names only against the GlobalConfiguration (a warning, not a
    rejection): kinds/virtualserver/translate/virtualserver.py does."""

    http: str
    https: str


@dataclass(frozen=True)
class VirtualServer:
    # The kind it claims hosts as (configuration.Claimant).
    kind: ClassVar[str] = "VirtualServer"
    meta: Meta
    ingress_class: str
    host: str
    tls: TLS | None
    policies: tuple[PolicyRef, ...]
    upstreams: tuple[Upstream, ...]
    routes: tuple[Route, ...]
    listener: Listeners | None = None

    variety = ""  # its resource gauge has no split (Claimant)

    def hosts(self) -> tuple[str, ...]:
        """The hosts it claims (as ``Ingress.hosts``): its one host."""
        return (self.host,)

    def delegating_paths(self, namespace: str, name: str) -> tuple[str, ...]:
        """The normalised paths of the routes handing over to VirtualServerRoute namespace/name."""
        target = RouteRef(namespace, name)
        return tuple(str(r.path) for r in self.routes if r.route == target)

    def selecting_paths(self, labels: Mapping[str, str]) -> tuple[str, ...]:
        """The normalised paths of the routes whose routeSelector picks a VirtualServerRoute
        with these labels (in any namespace, as NIC's selector does)."""
        return tuple(
            str(r.path)
            for r in self.routes
            if r.route_selector and all(labels.get(k) == v for k, v in r.route_selector)
        )


def parse_host(o: Obj) -> str:
    host = o.text("host")
    where = o.at("host")
    if not host:
        o.ctx.add(required(where))
    elif host.startswith("*."):
        o.ctx.extend([invalid(where, host, m) for m in rules.wildcard_dns1123_subdomain(host)])
    else:
        o.ctx.extend([invalid(where, host, m) for m in rules.dns1123_subdomain(host)])
    return host


def _tls(spec: Obj, cert_manager_enabled: bool) -> TLS | None:
    t = spec.obj("tls", TLS_KEYS)
    if t is None:
        return None
    ctx = t.ctx
    secret = t.text("secret")
    ctx.extend(
        [invalid(t.at("secret"), secret, m) for m in rules.dns1123_subdomain(secret) if secret]
    )
    cert_manager = parse_cert_manager(t, secret, enabled=cert_manager_enabled)
    redirect = None
    if (r := t.obj("redirect", frozenset({"enable", "code", "basedOn"}))) is not None:
        code = r.integer("code")
        if code is not None and code not in rules.REDIRECT_CODES:
            ctx.add(invalid(r.at("code"), code, rules.REDIRECT_CODE_ERROR))
        based_on = r.text("basedOn")
        if based_on not in ("", "scheme", "x-forwarded-proto"):
            ctx.add(
                invalid(
                    r.at("basedOn"), based_on, "accepted values are 'scheme', 'x-forwarded-proto'"
                )
            )
        if r.boolean("enable"):
            redirect = TLSRedirect(code or 301, based_on or "scheme")
    return TLS(secret, redirect, cert_manager)


def _unsupported(spec: Obj) -> None:
    for key, reason in _NOT_SUPPORTED.items():
        value = spec.raw.get(key)
        if key == "externalDNS":
            used = isinstance(value, Mapping) and value.get("enable") is True
        else:
            used = value not in (None, "", False)
        if used:
            spec.ctx.add(not_supported(spec.at(key), reason))


def _mixed_delegations(spec: Obj, namespace: str) -> None:
    """NIC: routes handing over to one VirtualServerRoute must share a modifier category."""
    raw_routes = spec.raw.get("routes")
    first: dict[str, str] = {}
    for i, r in enumerate(raw_routes if isinstance(raw_routes, list) else ()):
        delegate = r.get("route") if isinstance(r, Mapping) else None
        raw = r.get("path") if isinstance(r, Mapping) else None
        if not isinstance(delegate, str) or not delegate or not isinstance(raw, str):
            continue
        ref = delegate if "/" in delegate else f"{namespace}/{delegate}"
        category = split_path(raw).category
        if first.setdefault(ref, category) != category:
            spec.ctx.add(
                invalid(
                    f"spec.routes[{i}].path",
                    raw,
                    f"routes referencing the same VirtualServerRoute '{ref}' must use the same "
                    f"modifier type, but got '{first[ref]}' and '{category}'",
                )
            )


def parse_virtual_server(
    obj: Mapping[str, Any], context: Context | None = None, *, cert_manager: bool = False
) -> Parsed[VirtualServer]:
    """Validate a raw VirtualServer as NIC does: the model, or None and every problem."""
    ctx = context or Context()  # a test passes its own to see which fields are read
    meta = parse_object_meta(obj, ctx)
    spec = Obj.root(ctx, obj.get("spec"), "spec", SPEC_KEYS)
    if spec is None or meta is None:
        return Parsed(None, tuple(ctx.problems))
    namespace = meta.namespace
    ingress_class = spec.text("ingressClassName")
    host = parse_host(spec)
    tls = _tls(spec, cert_manager)
    policies = parse_policy_refs(spec, namespace)
    upstreams, names = parse_upstreams(spec)
    routes = parse_routes(spec, "routes", frozenset(names), namespace)
    _mixed_delegations(spec, namespace)
    _unsupported(spec)
    listener = spec.obj("listener", LISTENER_KEYS)
    listeners = Listeners(listener.text("http"), listener.text("https")) if listener else None
    if ctx.problems:
        return Parsed(None, tuple(ctx.problems))
    vs = VirtualServer(meta, ingress_class, host, tls, policies, upstreams, routes, listeners)
    return Parsed(vs, ())
