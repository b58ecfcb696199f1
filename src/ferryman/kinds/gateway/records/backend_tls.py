"""BackendTLSPolicies -> how each HTTPRoute/GRPCRoute backend is spoken to
(TLS, its CAs, its name, its SANs) and each policy's status (pure).

A policy targets Services in its namespace, or one of their ports by name
(``sectionName``). For one target the oldest policy (creationTimestamp, then
name) wins; the others are ``Accepted: False`` (``Conflicted``). A policy
naming a port is more specific than one naming the Service: a backendRef to
that port takes the first, other ports the second.

A backend whose policy is not accepted (no valid CA certificate, an
unsupported ``wellKnownCACertificates``) is answered 500 (gRPC: 503), as an
invalid backend is: the specification asks for an error rather than plain
text to a backend meant to be spoken to in TLS.

The status is per Gateway a targeted backend is reached from (the routes'
parents, ``status.ancestors``): ``Accepted`` (``Accepted``, ``Conflicted``,
``NoValidCACertificate``, ``Invalid``) and ``ResolvedRefs`` (``ResolvedRefs``,
``InvalidKind``, ``InvalidCACertificateRef``).

What reaches the record (``BackendTLS.item``): the CAs re-serialised from the
ConfigMaps' PEM, the hostname and SANs as the parser checked them, each
base64 (records/routes.py's U item).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ferryman.configs.record_text import b64
from ferryman.kinds.gateway.parse.backend_tls import CA_KEY, BackendTLSPolicy, LocalRef
from ferryman.kinds.gateway.parse.gateway_api import GROUP

MAX_CA_BYTES = 256 * 1024
SYSTEM = "System"

ObjectGet = Callable[[str, str], Mapping[str, Any] | None]
Backend = tuple[str, str, int]  # namespace, Service, port


@dataclass(frozen=True)
class BackendTLS:
    """How a backend is spoken to; ``cas`` empty: the system's trust store;
    ``usable`` False: the policy is not accepted, its requests are errors."""

    cas: bytes
    hostname: str
    sans: tuple[tuple[str, str], ...]  # (Hostname | URI, value)
    usable: bool = True
    # The Gateway's client certificate chain and key (PEM; b"": none):
    # spec.tls.backend.clientCertificateRef, per Gateway (translate/backend_tls.py).
    cert: bytes = b""
    key: bytes = b""

    def item(self) -> str:
        """The U item's backend TLS field: ``<CAs>.<hostname>.<SANs>``, then,
        with a client certificate, ``.<chain>.<key>``; base64 each, the SANs
        ``^``-separated ``H<name>``/``U<uri>`` (ferryman_gateway_tls.lua)."""
        sans = "^".join(b64(("H" if t == "Hostname" else "U") + v) for t, v in self.sans)
        fields = [b64(self.cas) if self.cas else "", b64(self.hostname), sans]
        if self.cert:
            fields += [b64(self.cert), b64(self.key)]
        return ".".join(fields)


@dataclass(frozen=True)
class _Resolved:
    tls: BackendTLS
    accepted: tuple[str, str, str]  # status, reason, message
    resolved: tuple[str, str, str]


@dataclass
class BackendTLSState:
    """Per backend its TLS (absent: plain), per policy its wanted status."""

    by_backend: dict[Backend, BackendTLS]
    statuses: dict[tuple[str, str], Mapping[str, Any]]


def resolve(
    policies: Iterable[BackendTLSPolicy],
    used: Mapping[Backend, set[tuple[str, str]]],
    service: ObjectGet,
    config_map: ObjectGet,
    controller: str,
) -> BackendTLSState:
    """``used``: each backend routes reach, with the Gateways they reach it
    from; ``service``/``config_map``: the store's objects."""
    ordered = sorted(policies, key=lambda p: (p.meta.creation_timestamp or "", p.meta.name))
    winners: dict[tuple[str, str, str | None], BackendTLSPolicy] = {}
    conflicted: set[tuple[str, str]] = set()
    for p in ordered:
        for t in p.targets:
            if t.group != "" or t.kind != "Service":
                continue
            target = (p.meta.namespace, t.name, t.section)
            if target in winners and winners[target] is not p:
                conflicted.add((p.meta.namespace, p.meta.name))
            else:
                winners.setdefault(target, p)
    resolved = {id(p): _resolve(p, config_map) for p in ordered}
    by_backend: dict[Backend, BackendTLS] = {}
    ancestors: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for backend, gateways in used.items():
        namespace, name, port = backend
        port_name = _port_name(service(namespace, name), port)
        chosen = None
        for p in ordered:
            targets = [
                t for t in p.targets if t.group == "" and t.kind == "Service" and t.name == name
            ]
            if p.meta.namespace != namespace or not targets:
                continue
            if any(t.section is None or t.section == port_name for t in targets):
                ancestors.setdefault((p.meta.namespace, p.meta.name), set()).update(gateways)
        if port_name is not None:
            chosen = winners.get((namespace, name, port_name))
        chosen = chosen or winners.get((namespace, name, None))
        if chosen is not None:
            by_backend[backend] = resolved[id(chosen)].tls
    statuses: dict[tuple[str, str], Mapping[str, Any]] = {}
    for p in ordered:
        key = (p.meta.namespace, p.meta.name)
        r = resolved[id(p)]
        accepted = (
            ("False", "Conflicted", "an older BackendTLSPolicy targets the same Service port")
            if key in conflicted
            else r.accepted
        )
        entries = [
            {
                "ancestorRef": {"group": GROUP, "kind": "Gateway", "namespace": ns, "name": gw},
                "controllerName": controller,
                "conditions": [
                    _condition("Accepted", accepted, p.meta.generation),
                    _condition("ResolvedRefs", r.resolved, p.meta.generation),
                ],
            }
            for ns, gw in sorted(ancestors.get(key, ()))
        ]
        statuses[key] = {"ancestors": entries}
    return BackendTLSState(by_backend, statuses)


def _condition(kind: str, value: tuple[str, str, str], generation: int) -> dict[str, Any]:
    status, reason, message = value
    return {"type": kind, "status": status, "reason": reason, "message": message,
            "observedGeneration": generation}  # fmt: skip


def _port_name(service: Mapping[str, Any] | None, port: int) -> str | None:
    spec = (service or {}).get("spec")
    ports = spec.get("ports") if isinstance(spec, Mapping) else None
    for p in ports if isinstance(ports, list) else ():
        if isinstance(p, Mapping) and p.get("port") == port:
            name = p.get("name")
            return name if isinstance(name, str) and name else None
    return None


def _resolve(p: BackendTLSPolicy, config_map: ObjectGet) -> _Resolved:
    sans = tuple((s.type, s.value) for s in p.sans)
    if p.well_known is not None:
        ok = p.well_known == SYSTEM
        return _Resolved(
            BackendTLS(b"", p.hostname, sans, usable=ok),
            ("True", "Accepted", "")
            if ok
            else ("False", "Invalid", f"wellKnownCACertificates {p.well_known} is not supported"),
            ("True", "ResolvedRefs", ""),
        )
    pems: list[bytes] = []
    bad_kind: list[str] = []
    bad_ref: list[str] = []
    for ref in p.ca_refs:
        if ref.group != "" or ref.kind != "ConfigMap":
            bad_kind.append(f"{ref.kind} {ref.name}: only ConfigMaps are supported")
            continue
        pem, why = ca_certificates(config_map(p.meta.namespace, ref.name), ref)
        if pem:
            pems.append(pem)
        else:
            bad_ref.append(why)
    problems = "; ".join(bad_kind + bad_ref)
    if bad_kind:
        resolved = ("False", "InvalidKind", problems)
    elif bad_ref:
        resolved = ("False", "InvalidCACertificateRef", problems)
    else:
        resolved = ("True", "ResolvedRefs", "")
    if not pems:
        return _Resolved(
            BackendTLS(b"", p.hostname, sans, usable=False),
            ("False", "NoValidCACertificate", problems),
            resolved,
        )
    tls = BackendTLS(b"".join(pems), p.hostname, sans)
    return _Resolved(tls, ("True", "Accepted", ""), resolved)


_PARSED: dict[str, bytes] = {}


def ca_certificates(obj: Mapping[str, Any] | None, ref: LocalRef) -> tuple[bytes, str]:
    """The certificates of a ConfigMap's ``ca.crt``, re-serialised (b"" and why not)."""
    if obj is None:
        return b"", f"ConfigMap {ref.name} does not exist"
    data = obj.get("data")
    text = data.get(CA_KEY) if isinstance(data, Mapping) else None
    if not isinstance(text, str) or not text.strip():
        return b"", f"ConfigMap {ref.name} has no {CA_KEY}"
    if len(text) > MAX_CA_BYTES:
        return b"", f"ConfigMap {ref.name}'s {CA_KEY} is larger than {MAX_CA_BYTES} bytes"
    if text not in _PARSED:
        if len(_PARSED) > 256:
            _PARSED.clear()
        _PARSED[text] = _reserialised(text)
    pem = _PARSED[text]
    if not pem:
        return b"", f"ConfigMap {ref.name}'s {CA_KEY} holds no valid CERTIFICATE PEM block"
    return pem, ""


def _reserialised(text: str) -> bytes:
    from cryptography import x509
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    try:
        certs = x509.load_pem_x509_certificates(text.encode())
    except (ValueError, TypeError, UnsupportedAlgorithm, x509.InvalidVersion):
        return b""
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)
