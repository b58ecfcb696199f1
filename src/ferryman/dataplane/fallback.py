"""The fallback certificate NGINX's TLS listener needs to start.

NGINX refuses an ``ssl`` listener without a certificate, but ferryman picks each
handshake's certificate in Lua and rejects names it has none for, so this one is
never presented. A fresh self-signed EC key is made once per state dir.

It is made in a child process (a fork): importing ``cryptography`` maps ~9 MB that a
process keeps for its whole life, and a controller serving no TLS Secret
never needs it otherwise (resources/secret.py imports it on first use).
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable
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
    """Raises OSError when it cannot be made (saying why)."""
    return begin_fallback_certificate(path)()


def begin_fallback_certificate(path: Path) -> Callable[[], Path]:
    """Starts making the certificate, when there is none; the function returned
    waits until it is made (and raises OSError, saying why, when it was not).

    Key, certificate and importing cryptography take ~0.15 s, a third of a
    start-up at 100 Ingresses in a fresh state dir (a pod's emptyDir is); NGINX
    needs the file only with the public listeners, so ``run`` goes on meanwhile.
    """
    if path.exists():
        return lambda: path
    # A fork, not a new interpreter: the running one may not be executable by
    # name (a venv's python behind a directory the service user cannot enter),
    # and a fork has this process's import path as it is.
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(read_end)
            _write(path)
        except BaseException as e:
            os.write(write_end, f"{type(e).__name__}: {e}".encode()[:4000])
            code = 1
        finally:
            os._exit(code)
    os.close(write_end)

    failure: list[str] = []
    waited = False

    def made() -> Path:
        # Called again (Angie needs the file earlier, run() once more later): the
        # pipe is closed by then, its descriptor maybe another file's.
        nonlocal waited
        if not waited:
            waited = True
            with os.fdopen(read_end, "rb") as pipe:
                why = pipe.read().decode(errors="replace")
            _, status = os.waitpid(pid, 0)
            if os.waitstatus_to_exitcode(status) != 0:
                failure.append(f"cannot make the fallback certificate {path}: {why or status}")
        if failure:
            raise OSError(failure[0])
        return path

    return made
