"""A one-route VirtualServer and a TLS echo backend, for the upstream field tests.

Moved from tests/integration/test_vs_upstream_fields.py, whose tests and others share them."""

from __future__ import annotations

import ssl
import tempfile
import threading
from pathlib import Path
from typing import Any

from ferryman.dataplane.fallback import self_signed
from testkit.harness import (
    _EchoServer,
)
from testkit.virtualservers import vs


def one_route(
    name: str, host: str, upstream: dict[str, Any], action: dict[str, Any] | None = None
) -> dict[str, Any]:
    u = {"name": "up", "service": "app", "port": 80, **upstream}
    return vs(name, host, [{"path": "/", "action": action or {"pass": "up"}}], [u])


class _TLSEcho:
    """The echo backend behind TLS (a self-signed certificate)."""

    def __init__(self, name: str) -> None:
        key, crt = self_signed(["backend.test"], days=1)
        d = Path(tempfile.mkdtemp())
        (d / "tls.pem").write_bytes(crt + key)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(d / "tls.pem")
        self.server = _EchoServer(name)
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.name = name
        self.port = int(self.server.server_address[1])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
