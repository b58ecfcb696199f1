"""TransportServers and GlobalConfiguration listeners -> stream records and stream.conf.

Two channels, as for HTTP (configs/model.py). What a balancer may decide per
connection travels in an ``S`` record that ngx_stream_ferryman_module reads
(the endpoint set it balances over, the method, max_fails/fail_timeout,
max_conns, the next-upstream rules): changing those, or the endpoints, needs no
reload. What NGINX only takes as directives of the stream ``server`` (its
``listen``, proxy_connect_timeout, proxy_timeout, proxy_requests,
proxy_responses) goes into ``stream.conf``: one server per listener, so adding
or removing a listener reloads, and so does a TransportServer whose connect or
session timeout or UDP counts differ from the defaults of the listener's server.

Every value here is a validated number, a validated listener name (a DNS-1035
label) or an address from GlobalConfiguration checked with ``ipaddress``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ferryman.configs.model import BackendKey, backend_key
from ferryman.configs.render import template_environment
from ferryman.kinds.transport.parse.transportserver import (
    DEFAULT_CONNECT_TIMEOUT_MS,
    DEFAULT_FAIL_TIMEOUT_MS,
    DEFAULT_LB_METHOD,
    DEFAULT_SESSION_TIMEOUT_MS,
    LB_METHODS,
    TransportServer,
)
from ferryman.resources.global_configuration import TLS_PASSTHROUGH, Listener
from ferryman.wire.records import Record

STREAM_FILE = "stream.conf"
# The record kinds ngx_stream_ferryman_module reads: a TransportServer, and the
# certificate of one that ends TLS.
STREAM_RECORD = Record.STREAM
CERTIFICATE_RECORD = Record.STREAM_CERTIFICATE


@dataclass(frozen=True)
class StreamServer:
    """One stream ``server``: a GlobalConfiguration listener and the
    directive-only settings of the TransportServer that holds it."""

    listener: str
    port: int
    udp: bool
    ipv4: str = ""
    ipv6: str = ""
    connect_timeout_ms: int = DEFAULT_CONNECT_TIMEOUT_MS
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    udp_requests: int | None = None
    udp_responses: int | None = None
    ssl: bool = False  # TLS ends here (a TransportServer on it has tls.secret)


@dataclass(frozen=True)
class Passthrough:
    """The stream server on the HTTPS port (--enable-tls-passthrough)."""

    port: int
    https_socket: str  # ferryman's own HTTPS server, for every other SNI name


def stream_server(
    listener: Listener, ts: TransportServer | None, ssl: bool = False
) -> StreamServer:
    server = StreamServer(
        listener.name, listener.port, listener.protocol == "UDP", listener.ipv4, listener.ipv6,
        ssl=ssl,
    )  # fmt: skip
    if ts is None:
        return server
    return StreamServer(
        server.listener,
        server.port,
        server.udp,
        server.ipv4,
        server.ipv6,
        ts.connect_timeout_ms,
        ts.session_timeout_ms,
        ts.udp_requests if server.udp else None,
        ts.udp_responses if server.udp else None,
        ssl,
    )


def record_name(ts: TransportServer) -> str:
    """The S (and T) record's key: the listener, and the host (an SNI name) if any."""
    return f"{ts.listener}/{ts.host}" if ts.host else ts.listener


def certificate_record(pair: str) -> str:
    """A T record from the certificate store's record (base64 chain, tab, base64
    key): the same, space-separated, as ngx_stream_ferryman_module reads fields."""
    return pair.replace("\t", " ")


def backends(ts: TransportServer) -> frozenset[BackendKey]:
    up = ts.upstream
    keys = {backend_key(ts.meta.namespace, up.service, str(up.port))}
    if up.backup:
        keys.add(backend_key(ts.meta.namespace, up.backup, str(up.backup_port)))
    return frozenset(keys)


def stream_record(ts: TransportServer) -> str:
    """``<backend> <method> <max_fails> <fail_timeout ms> <max_conns> <tries>
    <next_upstream 0|1> <next_upstream_timeout ms> [<backup backend>]``, as
    ngx_stream_ferryman_balancer.c reads it."""
    up = ts.upstream
    fields = [
        backend_key(ts.meta.namespace, up.service, str(up.port)),
        LB_METHODS[up.lb_method],
        str(up.max_fails),
        str(up.fail_timeout_ms),
        str(up.max_conns),
        str(ts.next_upstream_tries),
        "1" if ts.next_upstream else "0",
        str(ts.next_upstream_timeout_ms),
    ]
    if up.backup:
        fields.append(backend_key(ts.meta.namespace, up.backup, str(up.backup_port)))
    return " ".join(fields)


def passthrough_name(host: str) -> str:
    """The S record's key for ``host`` on the tls-passthrough listener."""
    return f"{TLS_PASSTHROUGH}/{host}"


def passthrough_record(backend: BackendKey) -> str:
    """The S record of a host another kind passes through on the tls-passthrough
    listener (an Ingress's ssl-passthrough): ``backend`` balanced as a
    TransportServer's upstream with NIC's defaults (``stream_record``'s fields)."""
    fields = (LB_METHODS[DEFAULT_LB_METHOD], "1", str(DEFAULT_FAIL_TIMEOUT_MS), "0 0 0 0")
    return " ".join((backend, *fields))


def render_stream(
    servers: list[StreamServer], passthrough: Passthrough | None, *, ipv6: bool = True
) -> str:
    """``ipv6``: listeners not naming an address listen on IPv6 too (configs/listen.py)."""
    template = template_environment().get_template("stream.conf.tmpl")
    return template.render(
        servers=sorted(servers, key=lambda s: s.listener), passthrough=passthrough, ipv6=ipv6
    )
