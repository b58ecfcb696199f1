"""What an Ingress's ``nginx.org/*`` annotations ask for, with the ConfigMap's
values as defaults: annotation > ConfigMap key > built-in default.

``ingress_options(annotations, configmap)`` is the one place this is resolved.
``configmap`` is NIC's ``nginx-config`` data as a plain mapping keyed by NIC's
ConfigMap key names ("proxy-connect-timeout", "lb-method", "hsts", ...), which
are the annotations' names without ``nginx.org/``; an invalid ConfigMap value
is skipped here (the ConfigMap's own reader reports it) and the built-in
default applies. The annotations themselves were validated when the Ingress
was parsed (``kinds/ingress/parse/annotations.py``: an invalid one rejects it).

The built-in defaults are ferryman's behaviour without annotations (NGINX's
own values where NIC's ConfigMap defaults to them), so an Ingress that asks for
nothing else stays on the C module's fast path (``slow``).

What cannot be applied per request is returned as a warning naming the reason
(``unsupported``), as VirtualServer does (docs/virtualserver.md).
``nginx.org/listen-ports`` and ``listen-ports-ssl`` are not options of the
routes: ``kinds/ingress/records/ports.py`` reads them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ferryman.configs.buffer_tiers import BufferAsk, TooLarge, parse_buffers, tier_kib
from ferryman.configs.configmap import hsts_preload
from ferryman.kinds.ingress.parse.annotations import OTHER_NIC, PREFIX, parse_value
from ferryman.kinds.ingress.records.limit_req import LimitReq, limit_req
from ferryman.resources.annotation_values import BadValue
from ferryman.resources.sticky_cookie import StickyCookie

HSTS_MAX_AGE = 2592000  # NIC's ConfigMap default: 30 days

# The ConfigMap keys that are defaults here. The others of its route-level keys
# (``configs/configmap.py``'s IN_NGINX_CONF: timeouts, body size, buffering,
# header hide/pass, server tokens, HSTS, redirect-to-https) are written into
# nginx.conf by the ConfigMap's reader, so NGINX applies them to every request
# already: an Ingress takes them from there, and only its own annotations
# become records (which override them per request).
_FROM_CONFIGMAP = frozenset(
    ["lb-method", "max-fails", "fail-timeout", "keepalive", "ssl-redirect", "http-redirect-code"]
)

# proxy-buffers, proxy-buffer-size and proxy-busy-buffers-size choose a buffer
# tier (``buffer_tiers``); these two have none.
_NOT_PER_REQUEST = {
    "proxy-max-temp-file-size": "proxy_max_temp_file_size",
    "client-body-buffer-size": "client_body_buffer_size",
}


@dataclass(frozen=True)
class IngressOptions:
    """The resolved per-Ingress settings; times in ms, sizes in bytes."""

    connect_timeout_ms: int | None = None  # None: NGINX's 60s
    read_timeout_ms: int | None = None
    send_timeout_ms: int | None = None
    client_max_body_size: int | None = None  # None: the server's; 0: no limit
    proxy_buffering: bool = True
    hide_headers: tuple[str, ...] = ()
    pass_headers: tuple[str, ...] = ()
    rewrites: Mapping[str, str] = field(default_factory=dict)  # service -> path
    ssl_redirect: bool = True
    redirect_to_https: bool = False
    redirect_code: int = 301
    hsts: str | None = None  # the header's value when HSTS is on
    hsts_behind_proxy: bool = False
    ssl_services: frozenset[str] = frozenset()
    grpc_services: frozenset[str] = frozenset()  # empty unless the ConfigMap's http2 is on
    websocket_services: frozenset[str] = frozenset()
    lb_method: str = "round_robin"
    max_fails: int = 1
    fail_timeout_ms: int = 10_000
    max_conns: int = 0
    keepalive: int | None = None  # None: ferryman's pool (kept connections)
    next_upstream_timeout_ms: int = 0
    next_upstream_tries: int = 0
    server_tokens: bool = False
    basic_auth_secret: str | None = None
    basic_auth_realm: str = ""
    path_regex: str | None = None
    set_headers: tuple[tuple[str, str], ...] = ()  # proxy-set-headers: (name, value)
    add_headers: tuple[tuple[str, str, bool], ...] = ()  # add-header: (name, value, always)
    # nginx.org/use-cluster-ip: the backends' keys name the ClusterIP (an E record
    # like any other), so the fast path serves them as well.
    use_cluster_ip: bool = False
    limit_req: LimitReq | None = None  # limit-req-*: the Ingress's rate limit
    # sticky-cookie-services: service -> its cookie (NGINX's sticky cookie)
    sticky: Mapping[str, StickyCookie] = field(default_factory=dict)
    # proxy-redirect-from/-to (NGINX's proxy_redirect); None: off, default or unset
    proxy_redirect: tuple[str, str] | None = None
    # proxy-buffer-size, proxy-buffers, proxy-busy-buffers-size: the buffer
    # tier (KiB, ``buffer_tiers``) of the slow path's location; None: the
    # server's buffers (NGINX's or the ConfigMap's).
    buffer_tier: int | None = None
    # ingress-nginx's rewrite-target (matched caseless), app-root and
    # permanent/temporal redirect (code, URL): ``ingress_nginx_paths``.
    rewrite_target: str | None = None
    app_root: str | None = None
    redirect: tuple[int, str] | None = None
    # ingress-nginx's force-ssl-redirect: None off; else whether the request
    # URI's trailing slash is kept (preserve-trailing-slash).
    force_ssl_redirect: bool | None = None
    # from-to-www-redirect: host -> the host its requests answer 308 to.
    www: tuple[tuple[str, str], ...] = ()
    # ingress-nginx's default-backend: the backend serving while a path's Service
    # has no endpoint (the Service's first port: port ref ""); None: none.
    fallback: str | None = None
    # ingress-nginx's custom-http-errors: the Ingress's name (X-Ingress-Name) and
    # the codes the fallback answers; None: none.
    custom_errors: tuple[str, tuple[int, ...]] | None = None
    # ingress-nginx's proxy-request-buffering: "off" is False (the route flag
    # ``s``: the slow path's @ferryman_streamed_* locations).
    request_buffering: bool = True

    def slow(self) -> bool:
        """Whether a host needs the Lua slow path (the V record) for these."""
        return self != IngressOptions(
            ssl_redirect=self.ssl_redirect,
            lb_method=self.lb_method if self.lb_method in ("round_robin", "least_conn") else "",
            max_fails=self.max_fails,
            fail_timeout_ms=self.fail_timeout_ms,
            use_cluster_ip=self.use_cluster_ip,
        )


def _resolved(
    key: str, annotations: Mapping[str, str], configmap: Mapping[str, str], default: object
) -> object:
    raw = annotations.get(PREFIX + key)
    if raw is not None:
        try:
            return parse_value(key, raw)
        except BadValue:
            return default  # the Ingress was rejected for it; never reached when served
    raw = configmap.get(key) if key in _FROM_CONFIGMAP else None
    if raw is not None:
        try:
            return parse_value(key, raw)
        except BadValue:
            return default  # the ConfigMap's reader reports it
    return default


def ingress_options(
    annotations: Mapping[str, str], configmap: Mapping[str, str]
) -> tuple[IngressOptions, list[str]]:
    """The options of an Ingress with ``annotations``, defaults from ``configmap``,
    and warnings for what is accepted but not applied (each says why).

    Remembered for the last ``_REMEMBERED`` sets of annotations and ConfigMap
    keys: most Ingresses of a cluster share theirs (none, or a team's few), and
    resolving ~40 options took ~6% of a start's CPU at 30,000 Ingresses."""
    key = (tuple(annotations.items()), tuple(configmap.items()))
    try:
        options, warnings = _remembered(key)
    except TypeError:  # a value that cannot be a key (never from a parser)
        return _options(annotations, configmap)
    return options, list(warnings)


_REMEMBERED = 1024


@functools.lru_cache(maxsize=_REMEMBERED)
def _remembered(
    key: tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]],
) -> tuple[IngressOptions, tuple[str, ...]]:
    options, warnings = _options(dict(key[0]), dict(key[1]))
    return options, tuple(warnings)


def _options(
    annotations: Mapping[str, str], configmap: Mapping[str, str]
) -> tuple[IngressOptions, list[str]]:
    def get(key: str, default: object) -> object:
        return _resolved(key, annotations, configmap, default)

    warnings: list[str] = []
    body = get("client-max-body-size", None)
    hsts = None
    if get("hsts", False) is True:
        max_age = get("hsts-max-age", HSTS_MAX_AGE)
        hsts = f"max-age={max_age}"
        if get("hsts-include-subdomains", False) is True:
            hsts += "; includeSubDomains"
        hsts += hsts_preload(configmap)
    next_upstream = get("proxy-next-upstream", ("error", "timeout"))
    if isinstance(next_upstream, tuple) and set(next_upstream) != {"error", "timeout"}:
        warnings.append(
            f"{PREFIX}proxy-next-upstream: proxy_next_upstream takes no variable; "
            "'error timeout' applies"
        )
    for key, directive in _NOT_PER_REQUEST.items():
        if get(key, None) is not None:
            warnings.append(f"{PREFIX}{key}: {directive} takes no variable; ignored")
    tier, why = _buffer_tier(get)
    if why is not None:
        warnings.append(why)
    for key in ("server-snippets", "location-snippets"):
        if PREFIX + key in annotations:
            warnings.append(f"{PREFIX}{key}: snippets are not supported by ferryman; ignored")
    grpc = get("grpc-services", frozenset())
    if grpc and configmap.get("http2") != "true":
        # NIC logs "annotation nginx.org/grpc-services requires HTTP2, ignoring".
        warnings.append(
            f"{PREFIX}grpc-services: requires HTTP2 (the ConfigMap's http2), ignoring; "
            "proxied as HTTP/1.1"
        )
        grpc = frozenset()
    for key in sorted(OTHER_NIC):
        if PREFIX + key in annotations:
            warnings.append(f"{PREFIX}{key}: not implemented by ferryman; ignored")
    limit, more = limit_req(annotations)
    warnings += more
    target = _rewrite_target(get("rewrite-target", None), get("rewrites", None), warnings)
    root = get("app-root", None)
    for key in ("upstream-zone-size",):
        if PREFIX + key in annotations:
            warnings.append(f"{PREFIX}{key}: ferryman's balancers share one zone; ignored")
    options = IngressOptions(
        connect_timeout_ms=_int_or_none(get("proxy-connect-timeout", None)),
        read_timeout_ms=_int_or_none(get("proxy-read-timeout", None)),
        send_timeout_ms=_int_or_none(get("proxy-send-timeout", None)),
        client_max_body_size=_int_or_none(body),
        proxy_buffering=get("proxy-buffering", True) is not False,
        hide_headers=_names(get("proxy-hide-headers", ())),
        pass_headers=_names(get("proxy-pass-headers", ())),
        rewrites=_mapping(get("rewrites", {})),
        ssl_redirect=get("ssl-redirect", True) is not False,
        redirect_to_https=get("redirect-to-https", False) is True,
        redirect_code=_int(get("http-redirect-code", 301), 301),
        hsts=hsts,
        hsts_behind_proxy=get("hsts-behind-proxy", False) is True,
        ssl_services=_services(get("ssl-services", frozenset())),
        grpc_services=_services(grpc),
        websocket_services=_services(get("websocket-services", frozenset())),
        lb_method=str(get("lb-method", "round_robin")),
        max_fails=_int(get("max-fails", 1), 1),
        fail_timeout_ms=_int(get("fail-timeout", 10_000), 10_000),
        max_conns=_int(get("max-conns", 0), 0),
        keepalive=_int_or_none(get("keepalive", None)),
        next_upstream_timeout_ms=_int(get("proxy-next-upstream-timeout", 0), 0),
        next_upstream_tries=_int(get("proxy-next-upstream-tries", 0), 0),
        server_tokens=get("server-tokens", False) is True,
        basic_auth_secret=_str_or_none(get("basic-auth-secret", None)),
        basic_auth_realm=str(get("basic-auth-realm", "")),
        path_regex=_str_or_none(get("path-regex", None)),
        set_headers=_pairs(get("proxy-set-headers", ())),
        add_headers=_triples(get("add-header", ())),
        use_cluster_ip=get("use-cluster-ip", False) is True,
        limit_req=limit,
        proxy_redirect=_proxy_redirect(annotations),
        sticky=_sticky(get("sticky-cookie-services", {})),
        buffer_tier=tier,
        rewrite_target=target,
        app_root=root if isinstance(root, str) else None,
    )
    return options, warnings


def _rewrite_target(target: object, rewrites: object, warnings: list[str]) -> str | None:
    """NIC's nginx.org/rewrite-target, as ferryman can serve it."""
    if not isinstance(target, str):
        return None
    if rewrites:
        # NIC's getRewriteTarget: the two are mutually exclusive.
        warnings.append(
            "nginx.org/rewrites and nginx.org/rewrite-target annotations are mutually "
            "exclusive; nginx.org/rewrites will take precedence"
        )
        return None
    if re.search(r"\$(?![0-9])", target):
        warnings.append(
            f"{PREFIX}rewrite-target: ferryman expands $1...$9 (the path's groups) and no "
            "other variable; ignored"
        )
        return None
    return target


def _sticky(value: object) -> dict[str, StickyCookie]:
    if not isinstance(value, dict):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, StickyCookie)}


def _proxy_redirect(annotations: Mapping[str, str]) -> tuple[str, str] | None:
    """The (redirect, replacement) pair; ``off`` and ``default`` rewrite nothing
    here (ferryman's proxy_pass names no upstream a backend could redirect to)."""
    origin = annotations.get(PREFIX + "proxy-redirect-from")
    replacement = annotations.get(PREFIX + "proxy-redirect-to")
    if origin is None or replacement is None or origin in ("off", "default"):
        return None
    return origin, replacement


def _buffer_tier(get: Callable[[str, object], object]) -> tuple[int | None, str | None]:
    """The buffer tier the annotations ask for, or a warning when none is
    large enough (the server's buffers then apply)."""
    buffers = get("proxy-buffers", None)
    ask = BufferAsk(
        buffer_size=_int_or_none(get("proxy-buffer-size", None)),
        buffers=parse_buffers(buffers) if isinstance(buffers, str) else None,
        busy_buffers_size=_int_or_none(get("proxy-busy-buffers-size", None)),
    )
    try:
        return tier_kib(ask), None
    except TooLarge as e:
        keys = [
            k
            for k, v in (
                ("proxy-buffer-size", ask.buffer_size),
                ("proxy-buffers", ask.buffers),
                ("proxy-busy-buffers-size", ask.busy_buffers_size),
            )
            if v is not None
        ]
        return None, f"{', '.join(PREFIX + k for k in keys)}: {e}"


def _int(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _names(value: object) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, tuple) else ()


def _services(value: object) -> frozenset[str]:
    return (
        frozenset(v for v in value if isinstance(v, str))
        if isinstance(value, frozenset)
        else frozenset()
    )


def _mapping(value: object) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _pairs(value: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, tuple):
        return ()
    return tuple((str(n), str(v)) for n, v in value)


def _triples(value: object) -> tuple[tuple[str, str, bool], ...]:
    if not isinstance(value, tuple):
        return ()
    return tuple((str(n), str(v), bool(a)) for n, v, a in value)
