"""Requests with client certificates and the answers NGINX gives without a valid one.

Moved from tests/integration/test_vs_auth_policies.py, whose tests and others share them."""

from __future__ import annotations

import http.client
import socket
import ssl
from pathlib import Path

from testkit.harness import Ferryman
from testkit.pki import Issued


def client_context(tmp: Path, client: Issued | None) -> ssl.SSLContext:
    """A TLS client context that trusts any server and presents ``client``'s
    certificate chain (None: no certificate); its files are written in ``tmp``."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if client is not None:
        cert, key = tmp / f"{id(client)}.crt", tmp / f"{id(client)}.key"
        cert.write_bytes(client.chain_pem)
        key.write_bytes(client.key_pem)
        ctx.load_cert_chain(cert, key)
    return ctx


def mtls_get(
    f: Ferryman, tmp: Path, host: str, client: Issued | None, path: str = "/"
) -> tuple[int, str]:
    """GET over TLS to ``host`` (SNI and Host), presenting ``client``'s certificate."""
    ctx = client_context(tmp, client)
    conn = http.client.HTTPSConnection("127.0.0.1", f.https_port, context=ctx, timeout=10)
    conn.sock = ctx.wrap_socket(
        socket.create_connection(("127.0.0.1", f.https_port), 10),
        server_hostname=host,
    )
    conn.request("GET", path, headers={"Host": host})
    r = conn.getresponse()
    body = r.read().decode()
    conn.close()
    return r.status, body


NO_CERT = "400 No required SSL certificate was sent"


CERT_ERROR = "400 The SSL certificate error"
