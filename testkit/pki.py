"""A small certificate authority for tests: CA, certificates it signs, CRLs (``cryptography``)."""

from __future__ import annotations

import base64
import datetime
import functools
from dataclasses import dataclass
from typing import Any, cast

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

NOW = datetime.datetime.now(datetime.UTC)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


@dataclass(frozen=True)
class Issued:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    chain: bytes = b""  # the intermediate CAs above it, PEM (none under a root)

    @property
    def chain_pem(self) -> bytes:
        """This certificate and the intermediates above it: what a peer presents."""
        return self.cert_pem + self.chain

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return _pem_key(self.key)


def authority(name: str, parent: str = "") -> Issued:
    """A CA named ``name`` (one per name): self-signed, or an intermediate signed by
    ``authority(parent)``."""
    return _authority(name, parent)


@functools.cache
def _authority(name: str, parent: str) -> Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    issuer = authority(parent) if parent else Issued(cast(x509.Certificate, None), key)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.cert.subject if parent else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW - datetime.timedelta(days=1))
        .not_valid_after(NOW + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .sign(issuer.key, hashes.SHA256())
    )
    return Issued(cert, key)


def issue(ca_name: str, common_name: str, *, server: bool = False, parent: str = "") -> Issued:
    """A certificate for ``common_name`` signed by ``authority(ca_name, parent)``: a
    client's, or with ``server`` a server's (the name also as a DNS SAN)."""
    return _issue(ca_name, common_name, server, parent)


@functools.cache
def _issue(ca_name: str, common_name: str, server: bool, parent: str) -> Issued:
    ca = authority(ca_name, parent)
    key = ec.generate_private_key(ec.SECP256R1())
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW - datetime.timedelta(days=1))
        .not_valid_after(NOW + datetime.timedelta(days=30))
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(common_name)]), critical=False
        )
    # Under an intermediate, the peer presents it too.
    return Issued(builder.sign(ca.key, hashes.SHA256()), key, ca.cert_pem if parent else b"")


def crl_pem(ca_name: str, revoked: list[Issued]) -> bytes:
    """A CRL of ``authority(ca_name)`` revoking ``revoked``."""
    ca = authority(ca_name)
    builder = (
        x509.CertificateRevocationListBuilder()
        .issuer_name(ca.cert.subject)
        .last_update(NOW - datetime.timedelta(days=1))
        .next_update(NOW + datetime.timedelta(days=30))
    )
    for issued in revoked:
        builder = builder.add_revoked_certificate(
            x509.RevokedCertificateBuilder()
            .serial_number(issued.cert.serial_number)
            .revocation_date(NOW - datetime.timedelta(hours=1))
            .build()
        )
    return builder.sign(ca.key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def ca_secret(
    name: str, ca_pem: bytes, crl: bytes | None = None, namespace: str = "default"
) -> dict[str, Any]:
    """A ``nginx.org/ca`` Secret as the API returns it."""
    data = {"ca.crt": base64.b64encode(ca_pem).decode()}
    if crl is not None:
        data["ca.crl"] = base64.b64encode(crl).decode()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": "nginx.org/ca",
        "data": data,
    }
