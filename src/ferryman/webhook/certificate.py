"""The webhook's serving certificate: a Secret's ``tls.crt``/``tls.key``/``ca.crt``.

The API server verifies the webhook against the configuration's ``caBundle``, so
what ferryman makes is a small CA and a serving certificate it signed: the CA
goes into the caBundle, and a serving certificate made again later under the
same CA would need no caBundle change. A Secret written by someone else
(cert-manager writes the same three keys) is used as it is; without ``ca.crt``
the last certificate of ``tls.crt`` is taken as the one to trust (a
self-signed certificate is its own).

``cryptography`` is imported only to make a certificate: reading one needs only
``ssl`` (the process keeps the ~9 MB the import maps, see dataplane/fallback.py).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import datetime
import ipaddress
import os
import ssl
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

# Made certificates are good for ten years: nothing renews them, and a webhook
# whose certificate expired costs every opted-in pod its gate (failurePolicy
# Ignore) or its creation (Fail). Delete the Secret to make a new one.
VALIDITY = datetime.timedelta(days=3650)
_END = b"-----END CERTIFICATE-----"


class CertificateError(ValueError):
    """A Secret's data is not a usable certificate and key."""


@dataclass(frozen=True)
class Bundle:
    cert: bytes  # PEM, the serving certificate (and any intermediates)
    key: bytes  # PEM
    ca: bytes  # PEM, what the caBundle holds

    def secret_data(self) -> dict[str, str]:
        return {
            "tls.crt": _b64(self.cert),
            "tls.key": _b64(self.key),
            "ca.crt": _b64(self.ca),
        }

    def ssl_context(self) -> ssl.SSLContext:
        """A server context serving this certificate; raises CertificateError
        when the key and certificate do not load or do not match."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.load_into(context)
        return context

    def load_into(self, context: ssl.SSLContext) -> None:
        """Serve this certificate from ``context`` (a serving context's next
        handshakes present it); raises CertificateError."""
        # load_cert_chain reads files only, and the root filesystem may be
        # read-only: memory files, so the key never touches a disk either.
        with _memory_file(self.cert) as cert, _memory_file(self.key) as key:
            try:
                context.load_cert_chain(cert, key)
            except (ssl.SSLError, OSError) as e:
                raise CertificateError(f"certificate and key do not load: {e}") from e


@contextlib.contextmanager
def _memory_file(data: bytes) -> Iterator[str]:
    fd = os.memfd_create("ferryman-webhook", os.MFD_CLOEXEC)
    try:
        with os.fdopen(os.dup(fd), "wb") as f:
            f.write(data)
        yield f"/proc/self/fd/{fd}"
    finally:
        os.close(fd)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def from_secret_data(data: Mapping[str, str] | None) -> Bundle:
    """The bundle a Secret's (base64) data holds; raises CertificateError."""
    decoded: dict[str, bytes] = {}
    for name in ("tls.crt", "tls.key", "ca.crt"):
        value = (data or {}).get(name)
        if not value:
            continue
        try:
            decoded[name] = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as e:
            raise CertificateError(f"{name} is not base64") from e
    if "tls.crt" not in decoded or "tls.key" not in decoded:
        raise CertificateError("no tls.crt and tls.key")
    ca = decoded.get("ca.crt") or _last_certificate(decoded["tls.crt"])
    if not ca:
        raise CertificateError("tls.crt holds no PEM certificate")
    return Bundle(decoded["tls.crt"], decoded["tls.key"], ca)


def _last_certificate(pem: bytes) -> bytes:
    end = pem.rfind(_END)
    if end < 0:
        return b""
    begin = pem.rfind(b"-----BEGIN CERTIFICATE-----", 0, end)
    return pem[begin : end + len(_END)] + b"\n" if begin >= 0 else b""


def generate(hosts: Sequence[str]) -> Bundle:
    """A fresh CA and a serving certificate for ``hosts`` (DNS names, or IP
    addresses for a webhook called by address), EC P-256."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    if not hosts:
        raise ValueError("a serving certificate needs at least one host")
    now = datetime.datetime.now(datetime.UTC)
    # Clocks of the API server and this machine may disagree a little.
    start, end = now - datetime.timedelta(hours=1), now + VALIDITY

    ca_key = ec.generate_private_key(ec.SECP256R1())
    signs_certificates = x509.KeyUsage(
        digital_signature=False,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ferryman webhook CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(signs_certificates, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )

    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return Bundle(cert.public_bytes(pem), key_pem, ca.public_bytes(pem))
