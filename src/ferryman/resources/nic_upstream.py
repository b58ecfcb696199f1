"""The ``upstreams`` of a VirtualServer or VirtualServerRoute: model and NIC's rules.

Times and sizes are held as numbers (milliseconds, bytes): their text never
travels further than this module.
"""

from __future__ import annotations

from dataclasses import dataclass

from ferryman.resources import nic_rules as rules
from ferryman.resources.nic_fields import (
    Obj,
    Problem,
    duplicate,
    forbidden,
    invalid,
    not_supported,
    required,
)
from ferryman.resources.sticky_cookie import DOMAIN, EXPIRES_MAX, NAME, PATH, SAMESITE, StickyCookie

UPSTREAM_KEYS = frozenset(
    [
        "name",
        "service",
        "subselector",
        "port",
        "lb-method",
        "fail-timeout",
        "max-fails",
        "max-conns",
        "keepalive",
        "connect-timeout",
        "read-timeout",
        "send-timeout",
        "next-upstream",
        "next-upstream-timeout",
        "next-upstream-tries",
        "buffering",
        "buffers",
        "buffer-size",
        "busy-buffers-size",
        "client-max-body-size",
        "client-body-buffer-size",
        "tls",
        "healthCheck",
        "slow-start",
        "queue",
        "sessionCookie",
        "use-cluster-ip",
        "ntlm",
        "type",
        "backup",
        "backupPort",
    ]
)
# Upstream fields NIC offers only with NGINX Plus, with NIC's own refusal on open source.
_PLUS_ONLY = {
    "healthCheck": "active health checks are only supported in NGINX Plus",
    "slow-start": "slow start is only supported in NGINX Plus",
    "queue": "queue is only supported in NGINX Plus",
    "ntlm": "NTLM is only supported in NGINX Plus",
}
_NOT_SUPPORTED = {
    "backup": "backup servers are not implemented",
    "backupPort": "backup servers are not implemented",
}
LB_METHODS = (
    "round_robin",
    "least_conn",
    "ip_hash",
    "random",
    "random two",
    "random two least_conn",
)
NEXT_UPSTREAM = frozenset(
    [
        "error",
        "timeout",
        "invalid_header",
        "http_500",
        "http_502",
        "http_503",
        "http_504",
        "http_403",
        "http_404",
        "http_429",
        "non_idempotent",
        "off",
    ]
)


@dataclass(frozen=True)
class LoadBalancing:
    """``lb-method``: one of LB_METHODS, or ``hash <key> [consistent]``."""

    method: str
    hash_key: str = ""
    consistent: bool = False


@dataclass(frozen=True)
class Buffers:
    number: int
    size: int  # bytes


@dataclass(frozen=True)
class Upstream:
    name: str
    service: str
    service_namespace: str | None  # set for NIC's "namespace/service" form
    port: int
    subselector: tuple[tuple[str, str], ...] = ()
    lb_method: LoadBalancing | None = None  # None: the controller's default
    fail_timeout_ms: int | None = None
    max_fails: int | None = None
    max_conns: int | None = None
    keepalive: int | None = None
    connect_timeout_ms: int | None = None
    read_timeout_ms: int | None = None
    send_timeout_ms: int | None = None
    next_upstream: tuple[str, ...] = ()
    next_upstream_timeout_ms: int | None = None
    next_upstream_tries: int = 0
    buffering: bool | None = None
    buffers: Buffers | None = None
    buffer_size: int | None = None
    busy_buffers_size: int | None = None
    client_max_body_size: int | None = None
    client_body_buffer_size: int | None = None
    tls: bool = False  # TLS to the backend
    type: str = "http"  # "http" or "grpc"
    # sessionCookie with enable: true (NGINX's sticky cookie; the slow path's balancer)
    session_cookie: StickyCookie | None = None
    # use-cluster-ip: the Service's ClusterIP and port instead of its endpoints
    use_cluster_ip: bool = False


def parse_upstreams(spec: Obj) -> tuple[tuple[Upstream, ...], set[str]]:
    """The upstreams and the set of names routes may refer to (duplicates reported)."""
    out, names = [], set()
    for u in spec.objs("upstreams", UPSTREAM_KEYS):
        name = u.text("name")
        name_problems = _dns1035(u, "name", name)
        if name_problems:
            u.ctx.extend(name_problems)
        elif name in names:
            u.ctx.add(duplicate(u.at("name"), name))
        else:
            names.add(name)
        upstream = _upstream(u, name)
        if upstream is not None and not name_problems:
            out.append(upstream)
    return tuple(out), names


def _dns1035(o: Obj, key: str, value: str) -> list[Problem]:
    if not value:
        return [required(o.at(key))]
    return [invalid(o.at(key), value, m) for m in rules.dns1035_label(value)]


def _upstream(u: Obj, name: str) -> Upstream | None:
    ctx = u.ctx
    before = len(ctx.problems)
    # Set as NIC sees it: an object, a non-empty string, true.
    used = {k for k, v in u.raw.items() if v is not None and v is not False and v != ""}
    ctx.extend([forbidden(u.at(k), message) for k, message in _PLUS_ONLY.items() if k in used])
    ctx.extend([not_supported(u.at(k), why) for k, why in _NOT_SUPPORTED.items() if k in used])
    service, namespace = _service(u)
    port = u.integer("port") or 0
    ctx.extend([invalid(u.at("port"), port, m) for m in rules.port(port)])
    subselector = u.str_map("subselector") or {}
    for k, v in subselector.items():
        ctx.extend([invalid(u.at("subselector"), k, m) for m in rules.qualified_name(k)])
        ctx.extend([invalid(u.at("subselector"), v, m) for m in rules.label_value(v)])
    kind = u.text("type")
    if kind not in ("", "http", "grpc"):
        ctx.add(invalid(u.at("type"), kind, "must be one of `grpc` or `http`"))
    tls = u.obj("tls", frozenset({"enable"}))
    upstream = Upstream(
        name=name,
        service=service,
        service_namespace=namespace,
        port=port,
        subselector=tuple(sorted(subselector.items())),
        lb_method=_lb_method(u),
        fail_timeout_ms=time_field(u, "fail-timeout"),
        max_fails=_non_negative(u, "max-fails"),
        max_conns=_non_negative(u, "max-conns"),
        keepalive=_non_negative(u, "keepalive"),
        connect_timeout_ms=time_field(u, "connect-timeout"),
        read_timeout_ms=time_field(u, "read-timeout"),
        send_timeout_ms=time_field(u, "send-timeout"),
        next_upstream=_next_upstream(u),
        next_upstream_timeout_ms=time_field(u, "next-upstream-timeout"),
        next_upstream_tries=_non_negative(u, "next-upstream-tries") or 0,
        buffering=u.boolean("buffering"),
        buffers=_buffers(u),
        buffer_size=_size(u, "buffer-size"),
        busy_buffers_size=_size(u, "busy-buffers-size"),
        client_max_body_size=_offset(u, "client-max-body-size"),
        client_body_buffer_size=_size(u, "client-body-buffer-size"),
        tls=bool(tls and tls.boolean("enable")),
        type=kind or "http",
        session_cookie=_session_cookie(u),
        use_cluster_ip=u.boolean("use-cluster-ip") is True,
    )
    return upstream if len(ctx.problems) == before else None


_SESSION_COOKIE_KEYS = frozenset(
    ["enable", "name", "path", "expires", "domain", "httpOnly", "secure", "samesite"]
)


def _session_cookie(u: Obj) -> StickyCookie | None:
    """``sessionCookie`` as NIC validates it (validateSessionCookie), applied when
    ``enable`` is true (NIC writes ``sticky cookie`` only then)."""
    c = u.obj("sessionCookie", _SESSION_COOKIE_KEYS)
    if c is None or not c.boolean("enable"):
        return None
    before = len(c.ctx.problems)
    name = c.text("name")
    if not name:
        c.ctx.add(required(c.at("name")))
    elif not NAME.fullmatch(name):
        c.ctx.add(
            invalid(
                c.at("name"),
                name,
                "a valid cookie name must consist of "
                "alphanumeric characters and !#%&'*+.^_`|~- (an RFC 6265 token)",
            )
        )
    path = c.text("path")
    if path and not PATH.fullmatch(path):
        c.ctx.add(
            invalid(
                c.at("path"),
                path,
                "must start with / and not contain whitespace, '\"', ',', ';' or '\\'",
            )
        )
    expires = c.text("expires")
    seconds = -1
    if expires == "max":
        seconds = EXPIRES_MAX
    elif expires:
        ms = rules.time_ms(expires)
        if ms is None:
            c.ctx.add(invalid(c.at("expires"), expires, rules.TIME_ERROR))
        else:
            seconds = ms // 1000
    domain = c.text("domain")
    if domain and not DOMAIN.fullmatch(domain):
        c.ctx.add(invalid(c.at("domain"), domain, "must be a valid domain name"))
    samesite = c.text("samesite").lower()
    if samesite and samesite not in SAMESITE:
        c.ctx.add(invalid(c.at("samesite"), samesite, "must be one of strict, lax or none"))
    if len(c.ctx.problems) != before:
        return None
    return StickyCookie(
        name=name,
        expires=seconds,
        domain=domain,
        path=path,
        httponly=bool(c.boolean("httpOnly")),
        secure=bool(c.boolean("secure")),
        samesite=samesite,
    )


def _service(u: Obj) -> tuple[str, str | None]:
    value = u.text("service")
    if "/" not in value:
        u.ctx.extend(_dns1035(u, "service", value))
        return value, None
    parts = value.split("/")
    if len(parts) != 2:
        message = " service reference must be in the format namespace/service-name"
    elif rules.dns1123_label(parts[0]) or not parts[0]:
        message = "invalid namespace in service reference"
    elif rules.dns1035_label(parts[1]) or not parts[1]:
        message = "invalid service name in service reference"
    else:
        return parts[1], parts[0]
    u.ctx.add(invalid(u.at("service"), value, message))
    return value, None


def _lb_method(u: Obj) -> LoadBalancing | None:
    raw = u.text("lb-method")
    if not raw:
        return None
    method = raw.strip()
    words = method.split(" ")
    if method in LB_METHODS:
        return LoadBalancing(method)
    if words[0] == "hash" and (len(words) == 2 or (len(words) == 3 and words[2] == "consistent")):
        if bad := rules.token(words[1], "hash key"):
            u.ctx.extend([invalid(u.at("lb-method"), raw, m) for m in bad])
            return None
        return LoadBalancing("hash", words[1], len(words) == 3)
    u.ctx.add(
        invalid(u.at("lb-method"), raw, f"invalid load balancing method: {_go_quote(method)}")
    )
    return None


def _go_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def time_field(o: Obj, key: str) -> int | None:
    """An NGINX time in milliseconds; "" or absent is None (NIC's validateTime)."""
    raw = o.text(key)
    if not raw:
        return None
    ms = rules.time_ms(raw)
    if ms is None:
        o.ctx.add(invalid(o.at(key), raw, rules.TIME_ERROR))
    return ms


def _size(o: Obj, key: str) -> int | None:
    raw = o.text(key)
    if not raw:
        return None
    size = rules.size_bytes(raw)
    if size is None:
        o.ctx.add(invalid(o.at(key), raw, rules.SIZE_ERROR))
    return size


def _offset(o: Obj, key: str) -> int | None:
    raw = o.text(key)
    if not raw:
        return None
    size = rules.offset_bytes(raw)
    if size is None:
        o.ctx.add(invalid(o.at(key), raw, rules.OFFSET_ERROR))
    return size


def _non_negative(o: Obj, key: str) -> int | None:
    n = o.integer(key)
    if n is not None and n < 0:
        o.ctx.add(invalid(o.at(key), n, "must be positive or zero"))
        return None
    return n


def _next_upstream(u: Obj) -> tuple[str, ...]:
    raw = u.text("next-upstream")
    seen: list[str] = []
    for param in raw.split():
        if param not in NEXT_UPSTREAM:
            u.ctx.add(invalid(u.at("next-upstream"), param, "not a valid parameter"))
        if param in seen:
            u.ctx.add(invalid(u.at("next-upstream"), param, "can not have duplicate parameters"))
        else:
            seen.append(param)
    return tuple(seen)


def _buffers(u: Obj) -> Buffers | None:
    b = u.obj("buffers", frozenset({"number", "size"}))
    if b is None:
        return None
    number = b.integer("number") or 0
    if number <= 0:
        b.ctx.add(invalid(b.at("number"), number, "must be positive"))
    raw = b.text("size")
    if not raw:
        b.ctx.add(required(b.at("size"), "cannot be empty"))
        return None
    size = _size(b, "size")
    return Buffers(number, size) if size is not None and number > 0 else None
