"""Every kind of record ferryman pushes, by name.

A record is ``(kind, key) -> value``; the kind travels as one letter (the push
body's first field, ``dataplane/lua/ferryman.lua``'s table names). Here each
letter has its name, the key it is keyed by, and who writes it.
"""

from __future__ import annotations

from enum import StrEnum


class Record(StrEnum):
    # Keyed by backend key (namespace/service:port): the peers, "addr#port ...".
    # Written by EndpointSets for every kind.
    ENDPOINTS = "E"
    # Keyed by host: TLS, redirect, default backend, balancing and the Ingress
    # paths the fast path routes (configs/routes.py is its reference).
    HOST = "H"
    # Keyed by certificate id: base64 PEM chain, tab, base64 PEM key.
    CERTIFICATE = "C"
    # Keyed by host: a VirtualServer's (or a guarded Ingress host's) routing,
    # done per request in Lua (kinds/virtualserver/records/virtualserver.py).
    ROUTING = "V"
    # Keyed by host: ingressMTLS's client certificate check.
    CLIENT_CHECK = "M"
    # Keyed by host: the VirtualServer routes ngx_http_ferryman_module serves
    # (kinds/virtualserver/records/fast.py).
    FAST_ROUTES = "F"
    # Keyed by listener: a TransportServer's stream routing
    # (ngx_stream_ferryman_module, kinds/transport/records/stream.py).
    STREAM = "S"
    # Keyed by listener: a TransportServer's TLS certificate.
    STREAM_CERTIFICATE = "T"
    # Keyed by address:port/listener: a Gateway listener's routing
    # (kinds/gateway/records/routes.py).
    GATEWAY = "W"
    # Keyed by address:port#listener: a Gateway HTTPS listener's client
    # certificate validation (kinds/gateway/records/frontend_tls.py).
    GATEWAY_CLIENT = "K"
    # Keyed as GATEWAY: the HTTPRoute matches ngx_http_ferryman_module serves
    # itself for that name (an F record, kinds/gateway/records/fast.py), "-"
    # for none; plaintext sockets only (kinds/gateway/records/servers.py).
    GATEWAY_FAST = "X"


# The records of a virtual host, each keyed by the host: HOST (served by the
# module), ROUTING (Lua routing: VirtualServers, guarded Ingress hosts),
# CLIENT_CHECK (ingressMTLS), FAST_ROUTES (the module's VirtualServer routes).
HOST_RECORDS = (Record.HOST, Record.ROUTING, Record.CLIENT_CHECK, Record.FAST_ROUTES)

# A pushed record: (kind, key) -> value; "" removes the record.
RecordKey = tuple[str, str]
