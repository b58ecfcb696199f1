"""gateway.networking.k8s.io/v1 TLSRoute: a typed view with the standard
channel's validation (v1.6's CRD: one rule, 1-16 backendRefs, 1-1024
hostnames that are names, not addresses).

A TLSRoute routes a TLS connection by its SNI name, on listeners of protocol
TLS: without ending TLS (mode Passthrough), so the backend sees the client's
handshake, or after ending it with the listener's certificate (mode
Terminate), so the backend sees plain bytes. Its parentRefs and hostnames read as an HTTPRoute's
(``gateway_api``), its backendRefs without filters.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ferryman.kinds.gateway.parse.fields import ObjectReference
from ferryman.kinds.gateway.parse.gateway_api import (
    ParentRef,
    parse_backend_ref,
    parse_hostnames,
    parse_parents,
)
from ferryman.resources.meta import Meta
from ferryman.resources.nic_fields import Context, Obj, Parsed, invalid, parse_object_meta, required


@dataclass(frozen=True)
class TLSBackend:
    ref: ObjectReference
    port: int | None
    weight: int


@dataclass(frozen=True)
class TLSRule:
    backends: tuple[TLSBackend, ...]
    name: str | None = None


@dataclass(frozen=True)
class TLSRoute:
    kind: ClassVar[str] = "TLSRoute"
    meta: Meta
    parents: tuple[ParentRef, ...]
    hostnames: tuple[str, ...]
    rules: tuple[TLSRule, ...]


_BACKEND_KEYS = frozenset({"group", "kind", "name", "namespace", "port", "weight"})


def parse_tls_route(obj: Mapping[str, Any]) -> Parsed[TLSRoute]:
    ctx = Context()
    meta = parse_object_meta(obj, ctx)
    spec = Obj.root(ctx, obj.get("spec"), "spec", frozenset({"parentRefs", "hostnames", "rules"}))
    if spec is None or meta is None:
        return Parsed(None, tuple(ctx.problems))
    parents = parse_parents(spec)
    hostnames = parse_hostnames(spec)
    if not hostnames:
        ctx.add(required("spec.hostnames", "a TLSRoute needs at least one hostname"))
    elif len(hostnames) > 1024:
        ctx.add(invalid("spec.hostnames", len(hostnames), "must have at most 1024 items"))
    for i, h in enumerate(hostnames):
        if _is_ip(h):
            ctx.add(invalid(f"spec.hostnames[{i}]", h, "must be a hostname, not an IP address"))
    rules = []
    for r in spec.objs("rules", frozenset({"name", "backendRefs"})):
        backends = tuple(
            TLSBackend(*parse_backend_ref(b)) for b in r.objs("backendRefs", _BACKEND_KEYS)
        )
        if not 1 <= len(backends) <= 16:
            ctx.add(invalid(r.at("backendRefs"), len(backends), "must have 1 to 16 items"))
        rules.append(TLSRule(backends, r.text("name") or None))
    if len(rules) != 1:
        ctx.add(invalid("spec.rules", len(rules), "must have exactly 1 item"))
    if ctx.problems:
        return Parsed(None, tuple(ctx.problems))
    return Parsed(TLSRoute(meta, parents, hostnames, tuple(rules)), ())


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True
