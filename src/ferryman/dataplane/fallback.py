"""The fallback certificate NGINX's TLS listener needs to start.

NGINX refuses an ``ssl`` listener without a certificate, but ferryman picks each
handshake's certificate in Lua and rejects names it has none for, so this one is
never presented. A fresh self-signed EC key is made once per state dir.
"""

from __future__ import annotations

import datetime
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from ferryman.dataplane.files import atomic_write


def ensure_fallback_certificate(path: Path) -> Path:
    if path.exists():
        return path
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ferryman-fallback")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .sign(key, hashes.SHA256())
    )
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ) + cert.public_bytes(serialization.Encoding.PEM)
    atomic_write(path, pem, mode=0o600)
    return path
