"""NIC's TransportServer (k8s.nginx.org/v1): TCP/UDP load balancing and TLS passthrough.

Validated as NIC's ``ValidateTransportServer`` does, with its messages (field
errors in Kubernetes' format). Times are held in milliseconds: their text goes
no further than this module. What ferryman cannot serve (active health checks,
NGINX Plus only; snippets, off as in NIC by default; ``hash`` balancing; TLS on
UDP) is refused with a clear reason rather than silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ferryman.resources import nic_rules as rules
from ferryman.resources.global_configuration import (
    TLS_PASSTHROUGH,
    TLS_PASSTHROUGH_PROTOCOL,
    listener_name_problems,
    protocol_problems,
)
from ferryman.resources.meta import Meta
from ferryman.resources.nic_fields import (
    Context,
    Obj,
    Parsed,
    duplicate,
    forbidden,
    invalid,
    not_found,
    not_supported,
    parse_object_meta,
    required,
)
from ferryman.resources.nic_upstream import time_field

SPEC_KEYS = frozenset(
    [
        "ingressClassName",
        "listener",
        "host",
        "tls",
        "upstreams",
        "upstreamParameters",
        "sessionParameters",
        "action",
        "serverSnippets",
        "streamSnippets",
    ]
)
UPSTREAM_KEYS = frozenset(
    [
        "name",
        "service",
        "port",
        "failTimeout",
        "maxFails",
        "maxConns",
        "healthCheck",
        "loadBalancingMethod",
        "backup",
        "backupPort",
    ]
)
PARAMETER_KEYS = frozenset(
    [
        "udpRequests",
        "udpResponses",
        "connectTimeout",
        "nextUpstream",
        "nextUpstreamTimeout",
        "nextUpstreamTries",
    ]
)
# NIC's stream methods for NGINX (not Plus) -> the balancer's name for it
# (ngx_stream_ferryman_balancer.c).
LB_METHODS = {
    "round_robin": "rr",
    "least_conn": "lc",
    "random": "random",
    "random two": "random2",
    "random two least_conn": "random2lc",
}
# NIC's default when none is given ("suits the Ingress Controller better").
DEFAULT_LB_METHOD = "random two least_conn"
# NIC's defaults for what it renders as directives.
DEFAULT_CONNECT_TIMEOUT_MS = 60_000
DEFAULT_SESSION_TIMEOUT_MS = 600_000
DEFAULT_FAIL_TIMEOUT_MS = 10_000


@dataclass(frozen=True)
class TSUpstream:
    name: str
    service: str
    port: int
    lb_method: str  # a key of LB_METHODS
    max_fails: int = 1
    fail_timeout_ms: int = DEFAULT_FAIL_TIMEOUT_MS
    max_conns: int = 0  # 0: no limit
    backup: str = ""  # a Service in the same namespace ("": none)
    backup_port: int = 0


@dataclass(frozen=True)
class TransportServer:
    # The kind it claims hosts as (configuration.Claimant).
    kind: ClassVar[str] = "TransportServer"
    meta: Meta
    ingress_class: str
    listener: str
    protocol: str  # TCP, UDP, or TLS_PASSTHROUGH
    host: str  # "" for none
    upstream: TSUpstream  # the one action.pass names
    udp_requests: int | None = None
    udp_responses: int | None = None
    connect_timeout_ms: int = DEFAULT_CONNECT_TIMEOUT_MS
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    next_upstream: bool = False
    next_upstream_timeout_ms: int = 0
    next_upstream_tries: int = 0
    tls_secret: str = ""  # TLS ends in NGINX with this Secret's pair ("": no TLS)

    variety = ""  # its resource gauge has no split (Claimant)

    @property
    def passthrough(self) -> bool:
        return self.listener == TLS_PASSTHROUGH

    def hosts(self) -> tuple[str, ...]:
        """The host it claims beside Ingresses and VirtualServers: a passthrough
        TransportServer's SNI name (engine/configuration.py); none otherwise."""
        return (self.host,) if self.passthrough else ()


def parse_transport_server(
    obj: Mapping[str, Any], context: Context | None = None, *, tls_passthrough: bool = True
) -> Parsed[TransportServer]:
    """Validate a raw TransportServer as NIC does: the model, or None and every problem
    (``context``: a test's own, to see which fields are read)."""
    ctx = context or Context()
    meta = parse_object_meta(obj, ctx)
    spec = Obj.root(ctx, obj.get("spec"), "spec", SPEC_KEYS)
    if spec is None or meta is None:
        return Parsed(None, tuple(ctx.problems))
    listener = spec.obj("listener", frozenset({"name", "protocol"}))
    name = listener.text("name") if listener else ""
    protocol = listener.text("protocol") if listener else ""
    passthrough = name == TLS_PASSTHROUGH or protocol == TLS_PASSTHROUGH_PROTOCOL
    if passthrough:
        _passthrough_listener(ctx, name, protocol, tls_passthrough)
    else:
        ctx.extend(listener_name_problems("spec.listener.name", name))
        ctx.extend(protocol_problems("spec.listener.protocol", protocol))
    host = _host(spec, passthrough, protocol)
    secret = _tls(spec, passthrough, host, protocol)
    upstreams = _upstreams(spec)
    params = spec.obj("upstreamParameters", PARAMETER_KEYS)
    udp_requests = _udp(params, "udpRequests", protocol)
    udp_responses = _udp(params, "udpResponses", protocol)
    connect = time_field(params, "connectTimeout") if params else None
    next_timeout = time_field(params, "nextUpstreamTimeout") if params else None
    tries = _non_negative(params, "nextUpstreamTries") if params else None
    next_upstream = bool(params and params.boolean("nextUpstream"))
    session = spec.obj("sessionParameters", frozenset({"timeout"}))
    session_timeout = time_field(session, "timeout") if session else None
    action = spec.obj("action", frozenset({"pass"}))
    target = action.text("pass") if action else ""
    if action is None:
        ctx.add(required("spec.action", "must specify action"))
    elif not target:
        ctx.add(required("spec.action", "must specify pass"))
    elif target not in upstreams:
        ctx.add(not_found("spec.action.pass", target))
    for key in ("serverSnippets", "streamSnippets"):
        if spec.text(key):
            ctx.add(
                forbidden(spec.at(key), "snippet specified but snippets feature is not enabled")
            )
    if ctx.problems:
        return Parsed(None, tuple(ctx.problems))
    return Parsed(
        TransportServer(
            meta=meta,
            ingress_class=spec.text("ingressClassName"),
            listener=name,
            protocol=protocol,
            host=host,
            upstream=upstreams[target],
            udp_requests=udp_requests,
            udp_responses=udp_responses,
            connect_timeout_ms=connect or DEFAULT_CONNECT_TIMEOUT_MS,
            session_timeout_ms=session_timeout or DEFAULT_SESSION_TIMEOUT_MS,
            # NIC reads the tries and the timeout only with nextUpstream on.
            next_upstream=next_upstream,
            next_upstream_timeout_ms=(next_timeout or 0) if next_upstream else 0,
            next_upstream_tries=(tries or 0) if next_upstream else 0,
            tls_secret=secret,
        ),
        (),
    )


def _passthrough_listener(ctx: Context, name: str, protocol: str, enabled: bool) -> None:
    """NIC's validateTLSPassthroughListener."""
    if not enabled:
        ctx.add(forbidden("spec.listener", "TLS Passthrough is not enabled"))
    elif name == TLS_PASSTHROUGH and protocol != TLS_PASSTHROUGH_PROTOCOL:
        ctx.add(
            invalid(
                "spec.listener.protocol",
                protocol,
                f"must be '{TLS_PASSTHROUGH_PROTOCOL}' for the built-in {TLS_PASSTHROUGH} listener",
            )
        )
    elif protocol == TLS_PASSTHROUGH_PROTOCOL and name != TLS_PASSTHROUGH:
        ctx.add(
            invalid(
                "spec.listener.name",
                name,
                f"must be '{TLS_PASSTHROUGH}' for a listener with the protocol "
                f"{TLS_PASSTHROUGH_PROTOCOL}",
            )
        )


def _host(spec: Obj, passthrough: bool, protocol: str) -> str:
    """NIC's validateTransportServerHost."""
    host = spec.text("host")
    where = spec.at("host")
    if protocol == "UDP":
        if host:
            spec.ctx.add(forbidden(where, "host field is not allowed for UDP TransportServers"))
        return host
    if not host:
        if passthrough:
            spec.ctx.add(required(where, "must specify host for TLS Passthrough TransportServers"))
        return host
    if host.startswith("*."):
        spec.ctx.extend([invalid(where, host, m) for m in rules.wildcard_dns1123_subdomain(host)])
    else:
        spec.ctx.extend([invalid(where, host, m) for m in rules.dns1123_subdomain(host)])
    return host.lower()


def _tls(spec: Obj, passthrough: bool, host: str, protocol: str) -> str:
    """NIC's validateTLS: the Secret TLS ends with ("": none). DTLS is not served."""
    tls = spec.obj("tls", frozenset({"secret"}))
    secret = tls.text("secret") if tls else ""
    if passthrough:
        if tls is not None:
            spec.ctx.add(
                forbidden(spec.at("tls"), "cannot specify tls for TLS Passthrough TransportServers")
            )
        return ""
    if host and not secret:
        spec.ctx.add(
            required(
                spec.at("tls"),
                "must specify spec.tls.secret when host is specified, and the "
                "TransportServer is not using the TLS Passthrough listener",
            )
        )
    elif secret:
        spec.ctx.extend(
            [invalid("spec.tls.secret", secret, m) for m in rules.dns1123_subdomain(secret)]
        )
        if protocol == "UDP":
            spec.ctx.add(not_supported(spec.at("tls"), "TLS on UDP (DTLS)"))
    return secret


def _upstreams(spec: Obj) -> dict[str, TSUpstream]:
    out: dict[str, TSUpstream] = {}
    for u in spec.objs("upstreams", UPSTREAM_KEYS):
        name = u.text("name")
        name_problems = listener_name_problems(u.at("name"), name)
        if name_problems:
            u.ctx.extend(name_problems)
        elif name in out:
            u.ctx.add(duplicate(u.at("name"), name))
        upstream = _upstream(u, name)
        if upstream is not None and not name_problems and name not in out:
            out[name] = upstream
    return out


def _upstream(u: Obj, name: str) -> TSUpstream | None:
    ctx = u.ctx
    before = len(ctx.problems)
    service = u.text("service")
    ctx.extend(listener_name_problems(u.at("service"), service))
    port = u.integer("port") or 0
    ctx.extend([invalid(u.at("port"), port, m) for m in rules.port(port)])
    max_fails = _non_negative(u, "maxFails")
    max_conns = _non_negative(u, "maxConns")
    fail_timeout = time_field(u, "failTimeout")
    if u.has("healthCheck"):
        ctx.add(not_supported(u.at("healthCheck"), "active health checks are NGINX Plus only"))
    raw = u.text("loadBalancingMethod")
    method = raw.strip() or DEFAULT_LB_METHOD
    if method.startswith("hash"):
        ctx.add(not_supported(u.at("loadBalancingMethod"), "hash load balancing"))
    elif method not in LB_METHODS:
        ctx.add(
            invalid(
                u.at("loadBalancingMethod"), raw, f"load balancing method is not valid: {method}"
            )
        )
    backup = u.text("backup")
    backup_port = _non_negative(u, "backupPort")
    if backup or backup_port is not None:
        _backup(u, backup, backup_port, raw)
    if len(ctx.problems) > before:
        return None
    return TSUpstream(
        name=name,
        service=service,
        port=port,
        lb_method=method,
        max_fails=1 if max_fails is None else max_fails,
        fail_timeout_ms=DEFAULT_FAIL_TIMEOUT_MS if fail_timeout is None else fail_timeout,
        max_conns=max_conns or 0,
        backup=backup,
        backup_port=backup_port or 0,
    )


def _backup(u: Obj, backup: str, port: int | None, method: str) -> None:
    """NIC's validateBackup."""
    ctx = u.ctx
    if backup and port is None:
        ctx.add(invalid(u.at("backupPort"), None, "both backup and backup port must be specified"))
    if not backup and port is not None:
        ctx.add(invalid(u.at("backup"), backup, "both backup and backup port must be specified"))
    if "hash" in method or "random" in method:
        ctx.add(
            forbidden(
                u.at("backup"),
                "backup cannot be used along with the 'hash', 'hash_ip' and 'random' "
                "load balancing methods",
            )
        )
    if backup:
        ctx.extend(listener_name_problems(u.at("backup"), backup))
    if port is not None:
        ctx.extend([invalid(u.at("backupPort"), port, m) for m in rules.port(port)])


def _udp(params: Obj | None, key: str, protocol: str) -> int | None:
    if params is None or not params.has(key):
        return None
    if protocol != "UDP":
        params.ctx.add(forbidden(params.at(key), "is not allowed for non-UDP TransportServers"))
        return None
    return _non_negative(params, key)


def _non_negative(o: Obj, key: str) -> int | None:
    n = o.integer(key)
    if n is not None and n < 0:
        o.ctx.add(invalid(o.at(key), n, "must be positive or zero"))
        return None
    return n
