"""nginx.org/ca Secrets: the certificate authorities a client (ingressMTLS) or a
backend (egressMTLS) certificate is verified against, and an optional CRL.

NIC checks that ``ca.crt`` starts with a certificate; ferryman reads every
certificate in it and the CRL (``ca.crl``, which NIC hands to ``ssl_crl``), so
a Secret NGINX could not use is refused when read, with the reason, and the
data plane gets re-serialised PEM only. The ``ca.crt`` of a kubernetes.io/tls
Secret is read the same way for ingress-nginx's proxy-ssl-secret.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ferryman.resources.secret import MAX_CHAIN_BYTES, TLS_TYPE, InvalidSecret, field

CA_TYPE = "nginx.org/ca"
CA_KEY = "ca.crt"
CRL_KEY = "ca.crl"
# A CRL of a busy CA can list tens of thousands of serials (~40 bytes each).
MAX_CRL_BYTES = 1024 * 1024


@dataclass(frozen=True)
class CABundle:
    certificates: bytes  # PEM
    crl: bytes = b""  # PEM; empty: none

    def record(self) -> str:
        """The push value (ferryman.lua reads it): base64 PEM certificates, then,
        after a space, the base64 PEM CRL when there is one."""
        out = base64.b64encode(self.certificates).decode()
        if self.crl:
            out += " " + base64.b64encode(self.crl).decode()
        return out


def _has(obj: Mapping[str, Any], key: str) -> bool:
    return any(
        isinstance(d, Mapping) and key in d for d in (obj.get("data"), obj.get("stringData"))
    )


def _certificates(obj: Mapping[str, Any]) -> bytes:
    """``ca.crt``'s certificates, re-serialised."""
    from cryptography import x509
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    unreadable = (ValueError, TypeError, UnsupportedAlgorithm, x509.InvalidVersion)
    try:
        certs = x509.load_pem_x509_certificates(field(obj, CA_KEY, MAX_CHAIN_BYTES))
    except unreadable as e:
        raise InvalidSecret(
            f"the data field {CA_KEY} must hold a valid CERTIFICATE PEM block: {e}"
        ) from e
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)


def parse_tls_ca(obj: Mapping[str, Any]) -> CABundle:
    """The ``ca.crt`` of a kubernetes.io/tls Secret (ingress-nginx's
    proxy-ssl-secret: the CAs its backend's certificate is verified against,
    beside the client pair); no CRL (ingress-nginx reads none there)."""
    if obj.get("type") != TLS_TYPE:
        raise InvalidSecret(f"type is {repr(obj.get('type'))[:80]}, want {TLS_TYPE!r}")
    if not _has(obj, CA_KEY):
        raise InvalidSecret(
            f"it has no data field {CA_KEY}: the CAs the backend's certificate is verified "
            "against (proxy-ssl-verify)"
        )
    return CABundle(_certificates(obj))


def parse_ca_secret(obj: Mapping[str, Any]) -> CABundle:
    """NIC's checks (type, ``ca.crt`` a certificate), then every certificate and the CRL."""
    from cryptography import x509
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    if obj.get("type") != CA_TYPE:
        raise InvalidSecret(f"CA secret must be of the type {CA_TYPE}")
    if not _has(obj, CA_KEY):
        raise InvalidSecret(f"CA secret must have the data field {CA_KEY}")
    pem = _certificates(obj)
    unreadable = (ValueError, TypeError, UnsupportedAlgorithm, x509.InvalidVersion)
    if not _has(obj, CRL_KEY):
        return CABundle(pem)
    raw = field(obj, CRL_KEY, MAX_CRL_BYTES)
    try:
        if raw.lstrip().startswith(b"-----BEGIN"):
            crl = x509.load_pem_x509_crl(raw)
        else:
            crl = x509.load_der_x509_crl(raw)
    except unreadable as e:
        raise InvalidSecret(f"the data field {CRL_KEY} must hold a PEM or DER CRL: {e}") from e
    return CABundle(pem, crl.public_bytes(serialization.Encoding.PEM))
