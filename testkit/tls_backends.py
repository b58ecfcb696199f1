"""TLS backends for passthrough tests: real TLS servers with their own
certificates, answering one HTTP line that names them, and a client that
shows which certificate it was presented (so a test sees TLS was not ended
on the way)."""

from __future__ import annotations

import socket
import ssl
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from ferryman.dataplane.fallback import self_signed


@dataclass
class TlsBackend:
    """An HTTPS server with its own certificate, answering NIC's secure app's
    line ("hello from pod <name>")."""

    name: str
    port: int
    certificate: bytes  # DER
    server: socket.socket

    def close(self) -> None:
        self.server.close()


def _serve(server: socket.socket, context: ssl.SSLContext, name: str) -> None:
    while True:
        try:
            conn, _ = server.accept()
        except OSError:
            return
        try:
            with context.wrap_socket(conn, server_side=True) as tls:
                tls.recv(4096)
                body = f"hello from pod {name}\n".encode()
                tls.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                    % (len(body), body)
                )
        except (OSError, ssl.SSLError):
            continue


def start_tls_backend(name: str, hosts: list[str]) -> TlsBackend:
    """A TLS backend on a free loopback port, its certificate for ``hosts``."""
    key, crt = self_signed(hosts, days=1)
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "crt.pem").write_bytes(crt)
        (Path(d) / "key.pem").write_bytes(key)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(Path(d) / "crt.pem", Path(d) / "key.pem")
    server = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=_serve, args=(server, context, name), daemon=True).start()
    der = ssl.PEM_cert_to_DER_cert(crt.decode())
    return TlsBackend(name, server.getsockname()[1], der, server)


def https(port: int, host: str, address: str = "127.0.0.1", path: str = "/") -> tuple[bytes, str]:
    """(the certificate the server presented, the response to GET ``path``) for SNI ``host``."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    raw = socket.create_connection((address, port), timeout=5)
    with context.wrap_socket(raw, server_hostname=host) as tls:
        der = tls.getpeercert(binary_form=True) or b""
        tls.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := tls.recv(65536):
            data += chunk
    return der, data.decode(errors="replace")
