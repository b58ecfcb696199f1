"""The fallback certificate NGINX's TLS listener needs to start.

NGINX refuses an ``ssl`` listener without a certificate, but ferryman picks each
handshake's certificate in Lua and rejects names it has none for, so this one is
never presented. A fresh self-signed EC key is made once per state dir.

It is made in a child process: importing ``cryptography`` maps ~9 MB that a
process keeps for its whole life, and a controller serving no TLS Secret
never needs it otherwise (resources/secret.py imports it on first use).
"""

from __future__ import annotations

import datetime
import subprocess
import sys
from pathlib import Path

from ferryman.dataplane.files import atomic_write


def self_signed(names: list[str], days: int) -> tuple[bytes, bytes]:
    """A fresh EC P-256 key and a self-signed certificate for ``names`` (PEM)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return key_pem, cert.public_bytes(serialization.Encoding.PEM)


def _write(path: Path) -> None:
    key_pem, cert_pem = self_signed(["ferryman-fallback"], days=3650)
    atomic_write(path, key_pem + cert_pem, mode=0o600)


def ensure_fallback_certificate(path: Path) -> Path:
    """Raises OSError when it cannot be made (the child's last error line says why)."""
    if not path.exists():
        child = subprocess.run(
            [sys.executable, "-m", "ferryman.dataplane.fallback", str(path)],
            capture_output=True,
            text=True,
            check=False,
        )
        if child.returncode != 0:
            lines = child.stderr.strip().splitlines() or [f"exit status {child.returncode}"]
            raise OSError(f"cannot make the fallback certificate {path}: {lines[-1]}")
    return path


if __name__ == "__main__":
    _write(Path(sys.argv[1]))
