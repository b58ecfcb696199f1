"""ingress-nginx's auth-tls-error-page with auth-tls-secret, through real NGINX
and real client certificates: a missing or refused certificate is a 302 to the
page (ingress-nginx's error_page 495 496 = <url>), no reload."""

from __future__ import annotations

import http.client
import socket
from pathlib import Path

from testkit.annotated_ingress import HOST, annotated, last, start
from testkit.harness import Backends, Ferryman, eventually, tls_secret
from testkit.mtls import CERT_ERROR, NO_CERT, client_context
from testkit.pki import Issued, authority, ca_secret, issue

P = "nginx.ingress.kubernetes.io/"
PAGE = "https://certs.example/help?from=ferryman"


def _get(f: Ferryman, tmp: Path, client: Issued | None) -> tuple[int, str | None, str]:
    ctx = client_context(tmp, client)
    conn = http.client.HTTPSConnection("127.0.0.1", f.https_port, context=ctx, timeout=10)
    conn.sock = ctx.wrap_socket(
        socket.create_connection(("127.0.0.1", f.https_port), 10), server_hostname=HOST
    )
    conn.request("GET", "/", headers={"Host": HOST})
    r = conn.getresponse()
    body = r.read().decode()
    conn.close()
    return r.status, r.getheader("Location"), body


def test_auth_tls_error_page_redirects_a_missing_or_refused_certificate(
    ferryman: Ferryman, backends: Backends, tmp_path: Path
) -> None:
    f = ferryman
    f.write("tls", tls_secret("ann-tls", [HOST]))
    f.write("ca", ca_secret("client-ca", authority("ingress-nginx-ca").cert_pem))
    tls = [{"hosts": [HOST], "secretName": "ann-tls"}]
    a = {
        P + "auth-tls-secret": "default/client-ca",
        P + "auth-tls-verify-client": "on",
        P + "auth-tls-error-page": PAGE,
    }
    start(f, backends, annotated(a, tls=tls))
    assert last(f)["reason"] == "AddedOrUpdated"
    assert _get(f, tmp_path, None)[:2] == (302, PAGE)
    assert _get(f, tmp_path, issue("other-ca", "x"))[:2] == (302, PAGE)
    assert _get(f, tmp_path, issue("ingress-nginx-ca", "client"))[0] == 200
    # optional: no certificate passes, a refused one goes to the page.
    f.write("doc0", annotated({**a, P + "auth-tls-verify-client": "optional"}, tls=tls))
    eventually(lambda: _get(f, tmp_path, None)[0] == 200, 60, "optional")
    assert _get(f, tmp_path, issue("other-ca", "y"))[:2] == (302, PAGE)
    # Without the page: NGINX's 400s again.
    f.write("doc0", annotated({P + "auth-tls-secret": "default/client-ca"}, tls=tls))
    eventually(lambda: _get(f, tmp_path, None)[0] == 400, 60, "no page")
    assert NO_CERT in _get(f, tmp_path, None)[2]
    assert CERT_ERROR in _get(f, tmp_path, issue("other-ca", "z"))[2]
    # A value that is not a URL rejects the Ingress rather than dropping the page.
    f.write("doc0", annotated({**a, P + "auth-tls-error-page": "$scheme://x"}, tls=tls))
    eventually(lambda: last(f)["reason"] == "Rejected", 60, "rejected")
    assert "auth-tls-error-page" in last(f)["message"]
    assert f.reloads() == 1
