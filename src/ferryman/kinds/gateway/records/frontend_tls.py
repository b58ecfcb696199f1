"""Gateways' client certificate validation (``spec.tls.frontend``,
parse/frontend_tls.py) resolved per HTTPS listener, the listeners'
conditions it makes, and the K records the handshake reads (pure).

Each HTTPS listener takes its port's validation (``perPort``, else
``default``). Its ``caCertificateRefs`` must be core ConfigMaps
(``InvalidCACertificateKind``), in the Gateway's namespace or in another whose
ReferenceGrant allows it (``RefNotPermitted``), existing with PEM
certificates in ``ca.crt`` (``InvalidCACertificateRef``): each reason with
``ResolvedRefs: False`` on the listener, and ``Accepted: False``
(``NoValidCACertificate``) too when no reference is usable. Such a listener
is not programmed: it never serves without the validation it asks for. HTTP
listeners are not touched, whatever their port.

A listener served with a validation has a K record, keyed
``<address>:<port>#<listener>`` (its socket and its field in its W records,
its number there and ``v``: records/servers.py; the data plane refuses the
handshake of such a listener without its K record), holding ``<mode> <depth> <CA id> <base64 CAs>``:
mode ``required`` (AllowValidOnly: a handshake without a certificate that
verifies is refused) or ``optional`` (AllowInsecureFallback: asked for,
verified, never required), the CAs re-serialised from the ConfigMaps' PEM,
their id a digest of them (the data plane caches parsed bundles by it).
A CA or mode change is a new K record, never a reload
(ferryman_gateway_mtls.lua).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from ferryman.configs.record_text import b64
from ferryman.kinds.gateway.parse.backend_tls import LocalRef
from ferryman.kinds.gateway.parse.frontend_tls import FrontendValidation
from ferryman.kinds.gateway.parse.gateway_api import GROUP, Gateway, Listener
from ferryman.kinds.gateway.records.backend_tls import ObjectGet, ca_certificates
from ferryman.kinds.gateway.records.listeners import granted
from ferryman.kinds.gateway.records.servers import Served, listener_id, socket_key
from ferryman.resources.meta import ObjectRef
from ferryman.resources.reference_grant import ReferenceGrant

# The longest chain verified: the client's certificate and up to 9 CAs above it.
VERIFY_DEPTH = 10
REQUIRED, OPTIONAL = "required", "optional"
INSECURE_CONDITION = "InsecureFrontendValidationMode"

# A listener's problem: (ResolvedRefs reason, message, no reference usable).
Problem = tuple[str, str, bool]


@dataclass
class Frontend:
    # (Gateway namespace, name, listener name) -> its problem, or its K value.
    problems: dict[tuple[str, str, str], Problem] = field(default_factory=dict)
    values: dict[tuple[str, str, str], str] = field(default_factory=dict)

    def problem(self, gateway: Gateway, listener: Listener) -> Problem | None:
        return self.problems.get((gateway.meta.namespace, gateway.meta.name, listener.name))

    def value(self, gateway: tuple[str, str], listener: Listener) -> str | None:
        return self.values.get((*gateway, listener.name))


def resolve(
    gateways: Iterable[Gateway], grants: list[ReferenceGrant], config_map: ObjectGet
) -> Frontend:
    out = Frontend()
    for g in gateways:
        if g.frontend is None:
            continue
        done: dict[int, Problem | str] = {}  # by id of the validation
        for lst in g.listeners:
            validation = g.frontend.for_port(lst.port)
            if lst.protocol != "HTTPS" or validation is None:
                continue
            if id(validation) not in done:
                done[id(validation)] = _resolve(g, validation, grants, config_map)
            got = done[id(validation)]
            key = (g.meta.namespace, g.meta.name, lst.name)
            if isinstance(got, str):
                out.values[key] = got
            else:
                out.problems[key] = got
    return out


def _resolve(
    g: Gateway, v: FrontendValidation, grants: list[ReferenceGrant], config_map: ObjectGet
) -> Problem | str:
    pems: list[bytes] = []
    first: tuple[str, str] | None = None
    for ref in v.refs:
        namespace = ref.namespace or g.meta.namespace
        where = f"{namespace}/{ref.name}"
        why: tuple[str, str] | None = None
        if (ref.group, ref.kind) != ("", "ConfigMap"):
            kind = f"{ref.group or 'core'}/{ref.kind}"
            why = ("InvalidCACertificateKind", f"caCertificateRef {where}: {kind} is not ConfigMap")
        elif namespace != g.meta.namespace and not granted(
            grants, (GROUP, "Gateway"), g.meta.namespace, ("", "ConfigMap"), namespace, ref.name
        ):
            why = ("RefNotPermitted", f"no ReferenceGrant allows ConfigMap {where}")
        else:
            pem, problem = ca_certificates(
                config_map(namespace, ref.name), LocalRef("", "ConfigMap", where)
            )
            if pem:
                pems.append(pem)
            else:
                why = ("InvalidCACertificateRef", problem)
        if why is not None and first is None:
            first = why
    if first is not None:
        return (*first, not pems)
    cas = b"".join(pems)
    digest = hashlib.sha256(cas).hexdigest()[:16]
    mode = OPTIONAL if v.insecure else REQUIRED
    return f"{mode} {VERIFY_DEPTH} {digest} {b64(cas)}"


def client_records(served: Iterable[Served]) -> dict[str, str]:
    """The K records of ``served`` listeners (numbered per socket as their W
    records number them)."""
    count: dict[str, int] = {}
    out: dict[str, str] = {}
    for s in served:
        socket = socket_key(s.address, s.listener.port)
        index = count.get(socket, 0)
        count[socket] = index + 1
        if s.client is not None:
            out[f"{socket}#{listener_id(index, s)}"] = s.client
    return out


def with_insecure_mode(
    statuses: MutableMapping[ObjectRef, Mapping[str, Any]], gateways: Iterable[Gateway]
) -> None:
    """A Gateway whose validation falls back somewhere (AllowInsecureFallback,
    by default or on a port) has the ``InsecureFrontendValidationMode``
    condition, in place; it goes when the mode does."""
    for g in gateways:
        ref = ObjectRef("Gateway", g.meta.namespace, g.meta.name)
        body = statuses.get(ref)
        if body is None or g.frontend is None or not g.frontend.insecure:
            continue
        condition = {"type": INSECURE_CONDITION, "status": "True",
                     "reason": "ConfigurationChanged",
                     "message": "clients without a valid certificate are accepted "
                                "(AllowInsecureFallback)",
                     "observedGeneration": g.meta.generation}  # fmt: skip
        statuses[ref] = {**body, "conditions": [*body.get("conditions", []), condition]}
