"""A real HTTP auth service for externalAuth Policies, answering by Authorization header.

Moved from tests/integration/test_vs_external_auth.py, whose tests and others share them."""

from __future__ import annotations

import ssl
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ferryman.dataplane.fallback import self_signed

# The answers the auth service gives, by Authorization header.
ANSWERS = {
    "Bearer ok": 200,
    "Bearer no": 403,
    "Bearer boom": 500,
    "Basic Zm9vOmJhcg==": 204,
    "Bearer cookie": 200,  # with a Set-Cookie (an oauth2-proxy refreshing its session)
    "Bearer fresh": 200,  # with Cache-Control: no-store
}


class _AuthHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _AuthServer

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.server.seen.append(
            {
                "method": self.command,
                "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": self.rfile.read(length) if length else b"",
                # The connection's port: the same one again is a kept connection.
                "port": self.client_address[1],
            }
        )
        authorization = self.headers.get("Authorization", "")
        code = ANSWERS.get(authorization, 401)
        self.send_response(code)
        if authorization == "Bearer cookie":
            self.send_header("Set-Cookie", "_oauth2_proxy=refreshed; Path=/; HttpOnly")
        if authorization == "Bearer fresh":
            self.send_header("Cache-Control", "no-store")
        if code == 401:
            self.send_header("WWW-Authenticate", 'Basic realm="Protected Area"')
        if code == 200:  # the identity an oauth2-proxy would hand on
            self.send_header("X-Auth-Request-User", "alice")
        body = b"" if code == 204 else b"auth\n"
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_HEAD = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _AuthServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, tls: bool, cert: tuple[bytes, bytes] | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _AuthHandler)
        self.seen: list[dict[str, Any]] = []
        if tls:
            key, crt = cert or self_signed(["basic-auth-svc.default.svc"], days=30)
            with tempfile.TemporaryDirectory() as d:
                (Path(d) / "k").write_bytes(key)
                (Path(d) / "c").write_bytes(crt)
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                context.load_cert_chain(str(Path(d) / "c"), str(Path(d) / "k"))
            # The handshake in the connection's thread, not in accept's.
            self.socket = context.wrap_socket(
                self.socket, server_side=True, do_handshake_on_connect=False
            )


class AuthService:
    """A backend for service_with_backends: name, address, port."""

    def __init__(
        self, name: str, tls: bool = False, cert: tuple[bytes, bytes] | None = None
    ) -> None:
        """``cert``: the TLS server's key and certificate chain (PEM), else self-signed."""
        self.name = name
        self.server = _AuthServer(tls, cert)
        self.address = "127.0.0.1"
        self.port = int(self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def seen(self) -> list[dict[str, Any]]:
        return self.server.seen
