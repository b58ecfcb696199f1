"""v1 Service and discovery.k8s.io/v1 EndpointSlice, as far as routing needs them.

Malformed ports are skipped rather than rejected: these objects are written
by the cluster (or by hand in manifests mode) and one bad port must not hide
the others. Addresses are another matter: they become the peers NGINX
connects to, so an EndpointSlice whose addresses are not what its
``addressType`` says, or whose shape is wrong, is rejected whole (InvalidResource),
as the API server would have rejected it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ferryman.resources import validation
from ferryman.resources.meta import InvalidResource, parse_meta

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
ADDRESS_TYPES = ("IPv4", "IPv6", "FQDN")
# The API server's own limits for one EndpointSlice (pkg/apis/discovery/validation).
MAX_ENDPOINTS = 1000
MAX_ADDRESSES = 100
MAX_SLICE_PORTS = 20_000


@dataclass(frozen=True)
class ServicePort:
    name: str
    port: int


@dataclass(frozen=True)
class Service:
    namespace: str
    name: str
    ports: tuple[ServicePort, ...]
    # The pods it selects (readiness gates); None: no selector, its endpoints are
    # managed by hand and it selects no pod.
    selector: Mapping[str, str] | None = None
    # spec.clusterIP when it is an address ("": headless, ExternalName, unset or
    # malformed): nginx.org/use-cluster-ip routes there (configs/endpoints.py).
    cluster_ip: str = ""

    def find_port(self, ref: int | str) -> ServicePort | None:
        """The port a number or name refers to; "" (a backend key's for
        ingress-nginx's default-backend annotation) is the first port."""
        if ref == "":
            return self.ports[0] if self.ports else None
        for p in self.ports:
            if (p.port == ref) if isinstance(ref, int) else (p.name == ref):
                return p
        return None


@dataclass(frozen=True)
class Endpoint:
    """One endpoint and its conditions, with the API's defaults for unset ones."""

    addresses: tuple[str, ...]
    ready: bool
    node_name: str
    # Answers requests (for a terminating pod: still does, while ready is false).
    serving: bool = True
    # Its pod is being deleted.
    terminating: bool = False
    # targetRef's name when it is a Pod ("" otherwise, or not a valid name): the
    # latency histogram's pod_name, as NIC labels it.
    pod_name: str = ""


@dataclass(frozen=True)
class EndpointSlice:
    namespace: str
    name: str
    service_name: str
    address_type: str
    ports: Mapping[str, int]  # port name ("" when unnamed) -> number
    endpoints: tuple[Endpoint, ...]


def service_name_of(obj: Mapping[str, Any]) -> str:
    """The Service an unvalidated EndpointSlice belongs to; "" when it names none."""
    md = obj.get("metadata")
    labels = md.get("labels") if isinstance(md, Mapping) else None
    name = labels.get(SERVICE_NAME_LABEL) if isinstance(labels, Mapping) else None
    return name if isinstance(name, str) else ""


def _ports(raw: object, where: str) -> list[tuple[str, int]]:
    """(name, number) of each well-formed entry; a non-list is an error."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InvalidResource([f"{where}: must be a list"])
    out = []
    for p in raw:
        if not isinstance(p, Mapping):
            continue
        name, number = p.get("name"), p.get("port")
        if not isinstance(name, str | None) or not isinstance(number, int):
            continue
        if validation.port_number(number) is None:
            out.append((name or "", number))
    return out


def parse_service(obj: Mapping[str, Any]) -> Service:
    meta = parse_meta(obj)
    spec = obj.get("spec")
    if spec is not None and not isinstance(spec, Mapping):
        raise InvalidResource(["spec: must be an object"])
    ports = _ports(spec.get("ports") if spec else None, "spec.ports")
    selector = spec.get("selector") if spec else None
    return Service(
        meta.namespace,
        meta.name,
        tuple(ServicePort(n, p) for n, p in ports),
        # A selector that is no map of strings (hand-written) selects nothing.
        dict(selector) if selector and _string_map(selector) else None,
        _cluster_ip(spec),
    )


def _cluster_ip(spec: Mapping[str, Any] | None) -> str:
    """The ClusterIP as an address NGINX can connect to, "" for none: it becomes
    a peer, so only what ``ipaddress`` reads as an address is taken."""
    if not spec or spec.get("type") == "ExternalName":
        return ""
    raw = spec.get("clusterIP")
    if not isinstance(raw, str):
        return ""
    try:
        return str(ipaddress.ip_address(raw))
    except ValueError:
        return ""  # "None" (headless) or malformed


def _string_map(value: object) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


def _address(value: object, address_type: str) -> str | None:
    """The address in canonical form, or None when it is not one of ``address_type``."""
    if not isinstance(value, str):
        return None
    if address_type == "FQDN":  # never routed to (see configs/endpoints.py), but checked
        return None if validation.dns1123_subdomain(value.removesuffix(".")) else value
    family = ipaddress.IPv4Address if address_type == "IPv4" else ipaddress.IPv6Address
    try:
        ip = family(value)
    except ValueError:
        return None
    # "fe80::1%eth0" parses, and a scope is free text: NGINX would get it verbatim.
    if isinstance(ip, ipaddress.IPv6Address) and ip.scope_id is not None:
        return None
    return str(ip)


def _endpoint(raw: object, where: str, address_type: str, errors: list[str]) -> Endpoint | None:
    if not isinstance(raw, Mapping):
        errors.append(f"{where}: must be an object")
        return None
    addresses = raw.get("addresses")
    if not isinstance(addresses, list) or not 1 <= len(addresses) <= MAX_ADDRESSES:
        errors.append(f"{where}.addresses: must be a list of 1 to {MAX_ADDRESSES} addresses")
        return None
    good = []
    for i, a in enumerate(addresses):
        if (canonical := _address(a, address_type)) is None:
            shown = repr(a)[:80]
            errors.append(f"{where}.addresses[{i}]: {shown} is not an {address_type} address")
        else:
            good.append(canonical)
    if len(good) < len(addresses):
        return None
    cond = raw.get("conditions")
    if not isinstance(cond, Mapping):
        cond = {}
    # The API's defaults: an unset "ready" means ready, an unset "serving" defers
    # to "ready", an unset "terminating" means not terminating.
    ready = cond.get("ready") is not False
    serving = cond.get("serving")
    node = raw.get("nodeName")
    return Endpoint(
        tuple(good),
        ready,
        node if isinstance(node, str) else "",
        serving=serving if isinstance(serving, bool) else ready,
        terminating=cond.get("terminating") is True,
        pod_name=_pod_name(raw.get("targetRef")),
    )


def _pod_name(ref: object) -> str:
    """targetRef's Pod name; "" for another kind or a name a Pod cannot have."""
    if not isinstance(ref, Mapping) or ref.get("kind") != "Pod":
        return ""
    name = ref.get("name")
    if not isinstance(name, str) or validation.dns1123_subdomain(name) is not None:
        return ""
    return name


def parse_endpoint_slice(obj: Mapping[str, Any]) -> EndpointSlice:
    """Raises InvalidResource when any address or the slice's shape is wrong."""
    meta = parse_meta(obj)
    errors: list[str] = []
    # Required by the API; hand-written manifests may leave it out for IPv4.
    address_type = obj.get("addressType", "IPv4")
    if address_type not in ADDRESS_TYPES:
        raise InvalidResource([f"addressType: must be one of {', '.join(ADDRESS_TYPES)}"])
    raw_ports = obj.get("ports")
    if isinstance(raw_ports, list) and len(raw_ports) > MAX_SLICE_PORTS:
        raise InvalidResource([f"ports: more than {MAX_SLICE_PORTS}"])
    ports = dict(_ports(raw_ports, "ports"))
    raw_endpoints = obj.get("endpoints")
    if raw_endpoints is None:
        raw_endpoints = []
    if not isinstance(raw_endpoints, list):
        raise InvalidResource(["endpoints: must be a list"])
    if len(raw_endpoints) > MAX_ENDPOINTS:
        raise InvalidResource([f"endpoints: more than {MAX_ENDPOINTS}"])
    endpoints = []
    for i, e in enumerate(raw_endpoints):
        if (parsed := _endpoint(e, f"endpoints[{i}]", address_type, errors)) is not None:
            endpoints.append(parsed)
    if errors:
        # A thousand endpoints of a hundred bad addresses: name a few, count the rest.
        shown = errors[:5] + ([f"and {len(errors) - 5} more"] if len(errors) > 5 else [])
        raise InvalidResource(shown)
    return EndpointSlice(
        namespace=meta.namespace,
        name=meta.name,
        service_name=meta.labels.get(SERVICE_NAME_LABEL, ""),
        address_type=address_type,
        ports=ports,
        endpoints=tuple(endpoints),
    )
