"""Which HTTPRoute backends speak HTTP/2 over cleartext (pure).

GEP-1911 (backend protocol selection): a backendRef to a Service port whose
``appProtocol`` is ``kubernetes.io/h2c`` (KEP-3726's standard name) is sent
HTTP/2 with prior knowledge, whatever the client spoke. NGINX's proxy module
speaks HTTP/1.x to upstreams only; its gRPC module speaks HTTP/2 (h2c) and
carries any method, path, headers and body. So such a backend's share of a
rule's requests goes on in ``@ferryman_h2c`` (grpc-locations.conf.tmpl:
``grpc_pass`` without the gRPC status mapping of NGINX's own errors), marked in
its G item (records/routes.py, the ``h`` filter).

``kubernetes.io/ws`` (WebSocket over HTTP/1.1's Upgrade), no appProtocol, and
any other value go on as HTTP/1.1, as before; a GRPCRoute's backends are
HTTP/2 anyway.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import replace
from typing import Any

from ferryman.kinds.gateway.parse.grpc_route import GRPCMatch
from ferryman.kinds.gateway.records.attach import RouteEntry

H2C = "kubernetes.io/h2c"

# A Service as the store holds it (None: it does not exist).
ServiceGet = Callable[[str, str], Mapping[str, Any] | None]


def app_protocol(service: Mapping[str, Any] | None, port: int) -> str | None:
    """The ``appProtocol`` of ``service``'s port numbered ``port`` (None: no
    such port, or none given)."""
    spec = (service or {}).get("spec")
    ports = spec.get("ports") if isinstance(spec, Mapping) else None
    for p in ports if isinstance(ports, list) else ():
        if isinstance(p, Mapping) and p.get("port") == port:
            value = p.get("appProtocol")
            return value if isinstance(value, str) else None
    return None


def mark_h2c(table: MutableMapping[Any, dict[str, list[RouteEntry]]], service: ServiceGet) -> None:
    """Set each HTTPRoute entry's ``h2c`` (in place): per backend, whether its
    Service port's appProtocol is ``kubernetes.io/h2c``. Each Service is read
    once per call, however many entries name it."""
    seen: dict[tuple[str, str, int], bool] = {}

    def h2c(namespace: str, name: str | None, port: int) -> bool:
        if name is None:  # an invalid backend: answered 500, no protocol
            return False
        key = (namespace, name, port)
        if key not in seen:
            seen[key] = app_protocol(service(namespace, name), port) == H2C
        return seen[key]

    for by_host in table.values():
        for entries in by_host.values():
            for i, e in enumerate(entries):
                if isinstance(e.match, GRPCMatch):
                    continue
                marks = tuple(h2c(ns, name, port) for ns, name, port, _ in e.backends)
                if any(marks):
                    entries[i] = replace(e, h2c=marks)
