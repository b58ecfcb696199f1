"""The ``ingressMTLS`` Policy: client certificates verified per host (ferryman_mtls.lua).

NIC writes ``ssl_client_certificate``, ``ssl_crl``, ``ssl_verify_client`` and
``ssl_verify_depth`` into the VirtualServer's ``server`` block, so only
``spec.policies`` may hold it, only with TLS, and only one. ferryman puts the
same into the host's M record, which the TLS handshake (by SNI) and the
access phase read: a changed Policy or CA Secret is a push, never a reload.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ferryman.configs.record_text import b64
from ferryman.kinds.policy.parse.policy import IngressMTLS, Policy
from ferryman.kinds.policy.records.base import SPEC, Enforced, Owner, Step
from ferryman.kinds.policy.records.reads import PolicyReads
from ferryman.resources.secret_ca import CA_TYPE, CABundle, parse_ca_secret


@dataclass(frozen=True)
class ClientCerts(Enforced):
    verify: str  # on, off, optional, optional_no_ca
    depth: int
    bundle: CABundle
    error_page: str = ""  # ingress-nginx's auth-tls-error-page
    # Enforced at the handshake and for every request of the host, from the M
    # record: the V record's item only marks it (ferryman_policy.lua skips it).
    letter = "m"

    def fields(self) -> tuple[str, ...]:
        return (self.verify, str(self.depth))

    def record(self) -> str:
        """The host's M record (ferryman_mtls.lua): verify, depth, an id naming the
        CA content (workers cache the parsed bundle by it), the bundle; with an
        error page, the CRL ("-": none) and the page's URL in base64."""
        value = self.bundle.record()
        digest = hashlib.sha256(value.encode()).hexdigest()[:16]
        record = f"{self.verify} {self.depth} {digest} {value}"
        if not self.error_page:
            return record
        crl = "" if self.bundle.crl else " -"
        return f"{record}{crl} {b64(self.error_page)}"


def translate(
    policy: Policy, key: str, current: Enforced | None, owner: Owner, reads: PolicyReads
) -> Step:
    m = policy.policy
    assert isinstance(m, IngressMTLS)
    if owner.context != SPEC:
        message = f"IngressMTLS policy {key} is not allowed in the {owner.context} context"
        return Step(None, (message,), error=True)
    if not owner.tls:
        return Step(None, (f"TLS must be enabled for IngressMTLS policy {key}",), error=True)
    if current is not None:
        message = (
            "Multiple ingressMTLS policies are not allowed. "
            f"IngressMTLS policy {key} will be ignored"
        )
        return Step(None, (message,))
    namespace = policy.meta.namespace
    secret_key = f"{namespace}/{m.client_cert_secret}"
    read = reads.secret_read(namespace, m.client_cert_secret, parse_ca_secret)
    if not read.secret_type:
        message = f'IngressMTLS policy "{key}" references a non-existent secret {secret_key}'
        return Step(None, (message,), error=True)
    if read.secret_type != CA_TYPE:
        message = (
            f"IngressMTLS policy {key} references a secret {secret_key} of a wrong type "
            f"'{read.secret_type}', must be '{CA_TYPE}'"
        )
        return Step(None, (message,), error=True)
    if not isinstance(read.value, CABundle):
        message = (
            f'IngressMTLS policy "{key}" references an invalid secret {secret_key}: {read.error}'
        )
        return Step(None, (message,), error=True)
    return Step(ClientCerts(m.verify_client, m.verify_depth, read.value, m.error_page))
