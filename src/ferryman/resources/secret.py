"""kubernetes.io/tls Secrets: decoding and checking a certificate and key pair.

``cryptography`` does the X.509 and key parsing: a hand-written PEM check
would accept pairs NGINX then refuses at reload time. It is imported when the
first pair is checked: loading it maps ~9 MB the controller keeps for its whole
life, and a controller serving no TLS never needs it.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ferryman.resources.meta import InvalidResource

TLS_TYPE = "kubernetes.io/tls"
# A Secret is at most 1 MiB (etcd's object limit), and a real chain is a few
# KB (leaf plus one or two intermediates). Each chain lives in NGINX's shared
# memory and is parsed per worker; 256 KiB allows a hundred-odd certificates.
MAX_CHAIN_BYTES = 256 * 1024
# An RSA key of 16384 bits (OpenSSL's largest) is 12.7 KB of PEM.
MAX_KEY_BYTES = 32 * 1024
_LIMITS = {"tls.crt": MAX_CHAIN_BYTES, "tls.key": MAX_KEY_BYTES}


@dataclass(frozen=True)
class TLSPair:
    """A validated pair, re-serialised so nothing but PEM blocks remains."""

    chain: bytes
    key: bytes


class InvalidSecret(InvalidResource):
    """One reason a Secret cannot serve TLS."""

    def __init__(self, message: str) -> None:
        super().__init__([message])


def field(obj: Mapping[str, Any], key: str, limit: int | None = None) -> bytes:
    """A Secret's ``data[key]`` (or ``stringData[key]``), decoded, at most ``limit`` bytes."""
    data = obj.get("data")
    value = None
    if isinstance(data, Mapping) and isinstance(data.get(key), str):
        try:
            # Like the API server's decoder, tolerate line-wrapped base64.
            value = base64.b64decode("".join(data[key].split()), validate=True)
        except (binascii.Error, ValueError) as e:
            raise InvalidSecret(f"data[{key!r}] is not valid base64") from e
    string_data = obj.get("stringData")
    if value is None and isinstance(string_data, Mapping):
        text = string_data.get(key)
        if isinstance(text, str):
            try:
                value = text.encode()
            except UnicodeEncodeError as e:  # a lone surrogate, from JSON's \ud800
                raise InvalidSecret(f"stringData[{key!r}] is not valid text") from e
    if value is None:
        raise InvalidSecret(f"data[{key!r}] is missing")
    most = _LIMITS[key] if limit is None else limit
    if len(value) > most:
        raise InvalidSecret(f"{key} is {len(value)} bytes; at most {most} are allowed")
    return value


def parse_tls_secret(obj: Mapping[str, Any]) -> TLSPair:
    """Check type, PEM syntax and that the key belongs to the certificate."""
    kind = obj.get("type")
    if kind != TLS_TYPE:
        shown = repr(kind)[:80]
        raise InvalidSecret(f"type is {shown}, want {TLS_TYPE!r}")
    return _checked_pair(field(obj, "tls.crt"), field(obj, "tls.key"))


def _checked_pair(cert_pem: bytes, key_pem: bytes) -> TLSPair:
    from cryptography import x509
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    # What cryptography raises for input it cannot read: bad PEM or DER (ValueError),
    # a key type it has no class for (TypeError), a curve or algorithm it does not
    # support (UnsupportedAlgorithm), a certificate version other than v1 or v3
    # (InvalidVersion, which is none of the others).
    unreadable = (ValueError, TypeError, UnsupportedAlgorithm, x509.InvalidVersion)
    try:
        certs = x509.load_pem_x509_certificates(cert_pem)
    except unreadable as e:
        raise InvalidSecret(f"tls.crt is not a PEM certificate: {e}") from e
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except unreadable as e:
        raise InvalidSecret(f"tls.key is not an unencrypted PEM private key: {e}") from e
    pub = serialization.PublicFormat.SubjectPublicKeyInfo
    try:
        cert_public = certs[0].public_key().public_bytes(serialization.Encoding.PEM, pub)
    except unreadable as e:  # the certificate's key is of a kind cryptography cannot load
        raise InvalidSecret(f"tls.crt has a public key ferryman cannot use: {e}") from e
    try:
        key_public = key.public_key().public_bytes(serialization.Encoding.PEM, pub)
        key_out = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    except unreadable as e:
        raise InvalidSecret(f"tls.key is of a kind ferryman cannot use: {e}") from e
    if key_public != cert_public:
        raise InvalidSecret("tls.key does not match the certificate in tls.crt")
    chain = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)
    return TLSPair(chain, key_out)
