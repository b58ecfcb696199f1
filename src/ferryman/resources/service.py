"""v1 Service and discovery.k8s.io/v1 EndpointSlice, as far as routing needs them.

Malformed entries are skipped rather than rejected: these objects are written
by the cluster (or by hand in manifests mode) and one bad port must not hide
the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ferryman.resources.meta import parse_meta

SERVICE_NAME_LABEL = "kubernetes.io/service-name"


@dataclass(frozen=True)
class ServicePort:
    name: str
    port: int


@dataclass(frozen=True)
class Service:
    namespace: str
    name: str
    ports: tuple[ServicePort, ...]

    def find_port(self, ref: int | str) -> ServicePort | None:
        for p in self.ports:
            if (p.port == ref) if isinstance(ref, int) else (p.name == ref):
                return p
        return None


@dataclass(frozen=True)
class Endpoint:
    addresses: tuple[str, ...]
    ready: bool
    node_name: str


@dataclass(frozen=True)
class EndpointSlice:
    namespace: str
    name: str
    service_name: str
    address_type: str
    ports: Mapping[str, int]  # port name ("" when unnamed) -> number
    endpoints: tuple[Endpoint, ...]


def parse_service(obj: Mapping[str, Any]) -> Service:
    meta = parse_meta(obj)
    spec = obj.get("spec")
    raw_ports = spec.get("ports") if isinstance(spec, Mapping) else None
    ports = []
    for p in raw_ports if isinstance(raw_ports, list) else []:
        if isinstance(p, Mapping) and isinstance(p.get("port"), int):
            ports.append(ServicePort(str(p.get("name") or ""), int(p["port"])))
    return Service(meta.namespace, meta.name, tuple(ports))


def parse_endpoint_slice(obj: Mapping[str, Any]) -> EndpointSlice:
    meta = parse_meta(obj)
    ports: dict[str, int] = {}
    for p in obj.get("ports") or []:
        if isinstance(p, Mapping) and isinstance(p.get("port"), int):
            ports[str(p.get("name") or "")] = int(p["port"])
    endpoints = []
    for e in obj.get("endpoints") or []:
        if not isinstance(e, Mapping):
            continue
        addrs = tuple(str(a) for a in e.get("addresses") or [] if isinstance(a, str))
        cond = e.get("conditions")
        # The API says an unset "ready" condition means ready.
        ready = not (isinstance(cond, Mapping) and cond.get("ready") is False)
        endpoints.append(Endpoint(addrs, ready, str(e.get("nodeName") or "")))
    return EndpointSlice(
        namespace=meta.namespace,
        name=meta.name,
        service_name=meta.labels.get(SERVICE_NAME_LABEL, ""),
        address_type=str(obj.get("addressType") or "IPv4"),
        ports=ports,
        endpoints=tuple(endpoints),
    )
