"""A TLS backend requiring client certificates, and the egressMTLS Policies and Secrets
that reach it.

Moved from tests/integration/test_egress_lua.py, whose tests and others share them."""

from __future__ import annotations

import base64
import contextlib
import json
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from testkit.pki import authority, issue


@dataclass
class Seen:
    """What the TLS backend saw of each handshake."""

    sni: list[str | None] = field(default_factory=list)
    client: list[str] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)  # the client's, per request
    # Per request: was its connection's TLS session resumed (an abbreviated handshake)?
    reused: list[bool] = field(default_factory=list)


def _backend(tmp: Path, seen: Seen, keep_alive: bool = False) -> ThreadingHTTPServer:
    """A TLS backend requiring a client certificate of egress-client-ca; each
    request's certificate name in ``seen.client``; ``keep_alive``: HTTP/1.1 (its
    connections may be kept and reused), else one request per connection."""
    server_cert = issue("backend-ca", "secure-app.example.com", server=True)
    (tmp / "server.crt").write_bytes(server_cert.cert_pem)
    (tmp / "server.key").write_bytes(server_cert.key_pem)
    (tmp / "clients.crt").write_bytes(authority("egress-client-ca").cert_pem)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tmp / "server.crt", tmp / "server.key")
    ctx.load_verify_locations(tmp / "clients.crt")
    ctx.verify_mode = ssl.CERT_REQUIRED

    def on_sni(sock: Any, name: str | None, _: Any) -> None:
        seen.sni.append(name)

    ctx.sni_callback = on_sni

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

        def do_GET(self) -> None:
            cert = self.connection.getpeercert()  # type: ignore[attr-defined]
            cn = dict(x[0] for x in cert["subject"])["commonName"] if cert else ""
            seen.client.append(cn)
            seen.ports.append(self.client_address[1])
            seen.reused.append(self.connection.session_reused)  # type: ignore[attr-defined]
            body = json.dumps({"client": cn}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


class _Peer:
    """The TLS backend as the harness's Service helper takes it."""

    def __init__(self, port: int) -> None:
        self.name = "mtls"
        self.port = port


class _Ok(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def ok_backend(ctx: ssl.SSLContext) -> Iterator[_Peer]:
    """A TLS backend answering "ok" with the server context ``ctx``."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield _Peer(int(httpd.server_address[1]))
    finally:
        httpd.shutdown()
        httpd.server_close()


@contextlib.contextmanager
def chain_backend(tmp: Path, chain_pem: bytes, key_pem: bytes) -> Iterator[_Peer]:
    """``ok_backend`` presenting ``chain_pem`` (a leaf and the intermediates
    above it): what upstream verification depths are tried on."""
    (tmp / "chain.pem").write_bytes(chain_pem)
    (tmp / "key.pem").write_bytes(key_pem)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tmp / "chain.pem", tmp / "key.pem")
    with ok_backend(ctx) as peer:
        yield peer


@contextlib.contextmanager
def client_cert_backend(tmp: Path) -> Iterator[tuple[_Peer, Seen]]:
    """``_backend`` (backend-ca's certificate for secure-app.example.com, asking
    for egress-client-ca's client certificates) and what it saw, stopped after."""
    seen = Seen()
    httpd = _backend(tmp, seen)
    try:
        yield _Peer(int(httpd.server_address[1])), seen
    finally:
        httpd.shutdown()
        httpd.server_close()


def _client_secret(name: str, client: str) -> dict[str, Any]:
    issued = issue("egress-client-ca", client)
    data = {"tls.crt": issued.cert_pem, "tls.key": issued.key_pem}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "default"},
        "type": "kubernetes.io/tls",
        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
    }


def _egress(name: str, secret: str) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "Policy",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"egressMTLS": {"tlsSecret": secret}},
    }
