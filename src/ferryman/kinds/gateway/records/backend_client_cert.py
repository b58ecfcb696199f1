"""A Gateway's backend client certificate (``spec.tls.backend.clientCertificateRef``,
the GatewayBackendClientCertificate feature) resolved, and the Gateway's
``ResolvedRefs`` condition that says how (pure).

The reference must be a core ``Secret`` of type ``kubernetes.io/tls`` whose
pair NGINX can load, in the Gateway's namespace or in another that grants it
(ReferenceGrant); else the Gateway is ``ResolvedRefs: False``
(``InvalidClientCertificateRef``, ``RefNotPermitted``) and presents none,
still ``Accepted``. The pair is presented to backends a BackendTLSPolicy has
the Gateway speak TLS to (records/backend_tls.py carries it in the U item, as
egressMTLS's P item carries its own: a change is a push, never a reload).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ferryman.kinds.gateway.parse.gateway_api import GROUP, Gateway
from ferryman.kinds.gateway.records.listeners import granted
from ferryman.resources.reference_grant import ReferenceGrant
from ferryman.resources.secret import TLSPair

# (namespace, name) -> the pair, or why the Secret cannot serve.
PairRead = Callable[[str, str], "TLSPair | str"]


@dataclass(frozen=True)
class ClientCertificates:
    pairs: dict[tuple[str, str], TLSPair]  # by Gateway (namespace, name)
    # by Gateway: its ResolvedRefs condition (status, reason, message), only
    # for Gateways that name a client certificate.
    resolved: dict[tuple[str, str], tuple[bool, str, str]]


def client_certificates(
    gateways: Iterable[Gateway], grants: list[ReferenceGrant], read: PairRead
) -> ClientCertificates:
    out = ClientCertificates({}, {})
    for g in gateways:
        ref = g.backend_client_cert
        if ref is None:
            continue
        key = (g.meta.namespace, g.meta.name)
        namespace = ref.namespace or g.meta.namespace
        if (ref.group, ref.kind) != ("", "Secret"):
            why = f"clientCertificateRef {ref.group or 'core'}/{ref.kind} is not a Secret"
            out.resolved[key] = (False, "InvalidClientCertificateRef", why)
            continue
        if namespace != g.meta.namespace and not granted(
            grants, (GROUP, "Gateway"), g.meta.namespace, ("", "Secret"), namespace, ref.name
        ):
            why = f"no ReferenceGrant allows Secret {namespace}/{ref.name}"
            out.resolved[key] = (False, "RefNotPermitted", why)
            continue
        pair = read(namespace, ref.name)
        if isinstance(pair, str):
            why = f"Secret {namespace}/{ref.name}: {pair}"
            out.resolved[key] = (False, "InvalidClientCertificateRef", why)
            continue
        out.pairs[key] = pair
        out.resolved[key] = (True, "ResolvedRefs", "")
    return out
