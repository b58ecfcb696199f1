"""The data-plane model: what NGINX is told, as values.

Two channels carry it. The NGINX configuration text (``MainConfig`` through the
templates) changes only with ferryman's own settings and the ConfigMap's keys
(``configs/configmap.py``). Everything that comes from
resources — virtual hosts, their routes, certificates, endpoint sets — is pushed
into NGINX's memory over a unix socket as single-line records, so a new Ingress,
a moved endpoint or a rotated certificate needs no reload. Every string in a
record has passed ``ferryman.resources.validation`` (no spaces, tabs, ``|`` or
newlines can occur) or was built by ferryman itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ferryman.configs.configmap import Tuning

# A backend is named by its endpoints key: "namespace/service:port", with the
# port as the Ingress wrote it (number or Service port name).
BackendKey = str

# The virtual host that serves requests no other host claims (rules without a
# host, an Ingress with only a defaultBackend). "_" is never a valid DNS name.
CATCH_ALL = "_"


def backend_key(namespace: str, service: str, port_ref: str) -> BackendKey:
    return f"{namespace}/{service}:{port_ref}"


@dataclass(frozen=True)
class Route:
    """One Ingress path. Prefix paths are stored without their trailing slash."""

    exact: bool
    path: str
    backend: BackendKey


@dataclass(frozen=True)
class VirtualHost:
    host: str  # a DNS name, "*.suffix", or CATCH_ALL
    routes: tuple[Route, ...]
    default_backend: BackendKey | None  # None: unmatched paths answer 404
    tls: bool = False
    cert_id: str | None = None  # None with tls: the Secret is unusable, reject handshakes
    redirect_https: bool = False
    balancing: str = "rr:1:10"  # see resources.ingress.Balancing.encode
    # A VirtualServer's custom listeners (spec.listener): the GlobalConfiguration
    # listener names plain HTTP and TLS are served on ("" for none); None: the
    # default ports only. Names are DNS-1035 labels (no ":" or spaces).
    listeners: tuple[str, str] | None = None


@dataclass(frozen=True)
class MainConfig:
    state_dir: str
    endpoints_socket: str
    http_port: int
    https_port: int
    lua_package_path: str
    modules: tuple[str, ...]
    worker_processes: str
    worker_shutdown_timeout: str  # "" for none
    worker_user: str | None
    shared_dict_size: str
    fallback_certificate: str
    status_socket: str
    status_port: int  # 0: no stub_status for admins over TCP
    status_allow: tuple[str, ...]  # CIDRs, validated by the CLI with ipaddress
    health_uri: str  # "" disables the health check on unknown hosts
    latency_socket: str  # "" unless --enable-latency-metrics
    # False for the bootstrap configuration: no public listeners until the
    # first complete state has been pushed, so nothing is answered half-configured.
    public: bool
    # ngx_http_ferryman_module is loaded: the fast path runs in C, not Lua.
    fast_module: bool = False
    # False: X-Forwarded-For is the client's address alone, not the client's
    # list with it appended (--compute-full-forwarded-for).
    compute_full_forwarded_for: bool = True
    # 400 for request paths a backend may read otherwise than the router did.
    strict_request_paths: bool = False
    # The ConfigMap's settings (--nginx-configmaps); ferryman's defaults without one.
    tuning: Tuning = field(default_factory=Tuning)
    # A stream block (TransportServers): ngx_stream_ferryman_module is loaded.
    stream: bool = False
    # TLS passthrough: the HTTPS port belongs to the stream block, and ferryman's
    # HTTPS server listens here (PROXY protocol) for the SNI names it terminates.
    tls_socket: str = ""
    # The public server takes the GlobalConfiguration's HTTP listeners and the
    # Ingresses' nginx.org/listen-ports (configs/http_listeners.py; the
    # controller writes both files).
    http_listeners: bool = False
    # --enable-gateway-api: the Gateway server, listening where
    # kinds/gateway/records/servers.py's file says (the controller writes it).
    gateway: bool = False
    # The Gateway server's plaintext sockets serve HTTP/2 with prior knowledge
    # (h2c, gRPC) beside HTTP/1.1: ``http2 on`` (dataplane/server_version.py).
    h2c: bool = False
    # No h2c of the server's own (Debian's 1.22), but ferryman's module tells
    # HTTP/2's preface apart itself: the Gateway server listens on the HTTP
    # sockets directly, with ``ferryman_h2c_detect`` (ngx_http_ferryman_h2c.c).
    h2c_detect: bool = False
    # Neither (a module built before ferryman_h2c_detect): the Gateway's HTTP
    # sockets are stream servers reading HTTP/2's preface ahead, which hand each
    # connection (PROXY protocol) to the Gateway server's HTTP/1.1 or HTTP/2
    # unix socket (ngx_stream_ferryman_h2c_module).
    h2c_hop: bool = False
    # The module routes Gateway listeners' requests too (its X records,
    # ferryman_gateway_route): a module built before it lacks the directive,
    # and the Gateway server is then Lua's alone (dataplane/main_file.py).
    gateway_fast: bool = False
    # Public ports listen on IPv6 too ([::], configs/listen.py): unless
    # --disable-ipv6, or the machine has no IPv6 (dataplane/ipv6.py).
    ipv6: bool = True

    @property
    def fast_zone_size(self) -> str:
        """The module's zone, sized so that the Lua dict always fills first.

        The zone holds a subset of the dict's records (hosts and endpoint sets,
        not certificates) under a slightly larger header, and slab rounding can
        at worst double a small record's slot; besides records it keeps ~0.8 MB
        of balancing counters and 0.5 MiB of in-flight counters. Twice the dict
        plus 2 MiB therefore never fills before the dict, whose free space NGINX
        reports (the fill ratio and the reserve for endpoint sets are measured
        there). Shared memory NGINX does
        not use costs address space, not RAM.
        """
        size = 2 * size_bytes(self.shared_dict_size) + (2 << 20)
        return f"{size >> 20}m" if size % (1 << 20) == 0 else f"{-(-size // 1024)}k"


_SIZE_RE = re.compile(r"([1-9][0-9]*)([kKmM]?)")


def size_bytes(text: str) -> int:
    """An NGINX size ("128m", "4096k", "65536") in bytes; ValueError otherwise."""
    m = _SIZE_RE.fullmatch(text)
    if m is None:
        raise ValueError(f"{text!r} is not a size such as 128m or 4096k")
    unit = {"": 1, "k": 1 << 10, "m": 1 << 20}[m.group(2).lower()]
    return int(m.group(1)) * unit
