"""Self-signed certificates for tests, made with ``cryptography`` (no files, no openssl)."""

from __future__ import annotations

import base64
import datetime
import functools
import socket
import ssl

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@functools.cache
def key_pem(seed: str) -> bytes:
    """A fresh P-256 key in PEM (PKCS#8); one per ``seed``."""
    del seed  # only distinguishes cache entries
    key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


@functools.cache
def cert_pem(common_name: str, key_seed: str | None = None) -> bytes:
    """A self-signed certificate for ``common_name`` over ``key_pem(key_seed)``."""
    key = serialization.load_pem_private_key(key_pem(key_seed or common_name), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(common_name)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def tls_secret(
    name: str,
    namespace: str = "default",
    cert: bytes | None = None,
    key: bytes | None = None,
) -> dict[str, object]:
    """A ``kubernetes.io/tls`` Secret as the API returns it (``data`` in base64)."""
    cert = cert if cert is not None else cert_pem(f"{name}.example.com")
    key = key if key is not None else key_pem(f"{name}.example.com")
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": "kubernetes.io/tls",
        "data": {"tls.crt": b64(cert), "tls.key": b64(key)},
    }


def served_names(port: int, sni: str | None) -> list[str] | None:
    """The DNS names of the certificate served; None: the handshake is refused."""
    from cryptography import x509

    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
            ctx.wrap_socket(raw, server_hostname=sni) as tls,
        ):
            der = tls.getpeercert(binary_form=True)
    except (ssl.SSLError, ConnectionResetError):
        return None
    assert der is not None
    cert = x509.load_der_x509_certificate(der)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    return list(san.value.get_values_for_type(x509.DNSName))
