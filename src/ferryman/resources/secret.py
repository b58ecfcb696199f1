"""kubernetes.io/tls Secrets: decoding and checking a certificate and key pair.

``cryptography`` does the X.509 and key parsing: a hand-written PEM check
would accept pairs NGINX then refuses at reload time.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization

TLS_TYPE = "kubernetes.io/tls"


@dataclass(frozen=True)
class TLSPair:
    """A validated pair, re-serialised so nothing but PEM blocks remains."""

    chain: bytes
    key: bytes


class InvalidSecret(ValueError):
    pass


def _field(obj: Mapping[str, Any], key: str) -> bytes:
    data = obj.get("data")
    if isinstance(data, Mapping) and isinstance(data.get(key), str):
        try:
            # Like the API server's decoder, tolerate line-wrapped base64.
            return base64.b64decode("".join(data[key].split()), validate=True)
        except (binascii.Error, ValueError) as e:
            raise InvalidSecret(f"data[{key!r}] is not valid base64") from e
    string_data = obj.get("stringData")
    if isinstance(string_data, Mapping) and isinstance(string_data.get(key), str):
        return str(string_data[key]).encode()
    raise InvalidSecret(f"data[{key!r}] is missing")


def parse_tls_secret(obj: Mapping[str, Any]) -> TLSPair:
    """Check type, PEM syntax and that the key belongs to the certificate."""
    if obj.get("type") != TLS_TYPE:
        raise InvalidSecret(f"type is {obj.get('type')!r}, want {TLS_TYPE!r}")
    cert_pem = _field(obj, "tls.crt")
    key_pem = _field(obj, "tls.key")
    try:
        certs = x509.load_pem_x509_certificates(cert_pem)
    except ValueError as e:
        raise InvalidSecret(f"tls.crt is not a PEM certificate: {e}") from e
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as e:
        raise InvalidSecret(f"tls.key is not an unencrypted PEM private key: {e}") from e
    pub = serialization.PublicFormat.SubjectPublicKeyInfo
    if key.public_key().public_bytes(serialization.Encoding.PEM, pub) != certs[
        0
    ].public_key().public_bytes(serialization.Encoding.PEM, pub):
        raise InvalidSecret("tls.key does not match the certificate in tls.crt")
    key_out = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    chain = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)
    return TLSPair(chain, key_out)
