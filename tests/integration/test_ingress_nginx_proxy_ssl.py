"""ingress-nginx's ``proxy-ssl-verify: "on"`` through ferryman and real NGINX to
real TLS backends: the backend's certificate is verified against the ``ca.crt``
of ``proxy-ssl-secret`` (a kubernetes.io/tls Secret holding the client pair
too), to ``proxy-ssl-verify-depth``, the name ``proxy-ssl-name``, sent as SNI
with ``proxy-ssl-server-name: "on"``; per request, no reload
(kinds/ingress/parse/ingress_nginx_access.py, kinds/policy/records/egress_mtls.py)."""

from __future__ import annotations

import base64
import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from testkit.annotated_ingress import HOST, annotated, last
from testkit.egress import Seen, _Peer, chain_backend, client_cert_backend
from testkit.harness import Ferryman, eventually, service_with_backends
from testkit.pki import Issued, authority, issue

P = "nginx.ingress.kubernetes.io/"
NAME = "secure-app.example.com"  # the name testkit.egress's backend holds


def _proxy_ssl_secret(name: str, ca: bytes | None) -> dict[str, Any]:
    """ingress-nginx's layout: the client pair (egress-client-ca's, which the
    backend asks for) and, when given, the CAs in ca.crt."""
    client = issue("egress-client-ca", "alice")
    data = {"tls.crt": client.cert_pem, "tls.key": client.key_pem}
    if ca is not None:
        data["ca.crt"] = ca
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "default"},
        "type": "kubernetes.io/tls",
        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
    }


def _verified(secret: str, **more: str) -> dict[str, str]:
    return {
        P + "backend-protocol": "HTTPS",
        P + "proxy-ssl-secret": f"default/{secret}",
        P + "proxy-ssl-verify": "on",
        P + "proxy-ssl-name": NAME,
        P + "proxy-ssl-server-name": "on",
        **more,
    }


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[tuple[_Peer, Seen]]:
    with client_cert_backend(tmp_path) as served:
        yield served


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_proxy_ssl_verify_serves_a_backend_of_the_secrets_ca_and_502s_another(
    ferryman: Ferryman, backend: tuple[_Peer, Seen]
) -> None:
    """The Secret's ca.crt signed the backend's certificate: served, the backend
    seeing the Secret's client certificate and the name as SNI. Another CA in
    ca.crt: 502, the backend never gets the request. No ca.crt: every request
    500 and a Warning naming the Secret (never proxied unverified, where
    ingress-nginx would). Each Secret edit with no reload."""
    f = ferryman
    peer, seen = backend
    f.write("svc", service_with_backends("app", [peer]))
    f.write("secret", _proxy_ssl_secret("backend-tls", authority("backend-ca").cert_pem))
    f.write("doc0", annotated(_verified("backend-tls")))
    f.start()
    r = f.get(HOST, "/")
    assert (r.status, r.json()) == (200, {"client": "alice"})
    assert seen.sni[-1] == NAME
    assert last(f)["reason"] == "AddedOrUpdated"
    # Another CA: the backend's certificate does not verify.
    f.write("secret", _proxy_ssl_secret("backend-tls", authority("other-ca").cert_pem))
    eventually(lambda: f.get(HOST, "/").status == 502, 60, "another CA")
    served = len(seen.client)
    assert f.get(HOST, "/").status == 502
    assert len(seen.client) == served  # the request did not reach the backend
    assert "upstream SSL certificate verify error" in f.log_path.read_text(errors="replace")
    # No ca.crt: fail closed, said.
    f.write("secret", _proxy_ssl_secret("backend-tls", None))
    eventually(lambda: f.get(HOST, "/").status == 500, 60, "no ca.crt")
    event = f.last_event("ann", "AddedOrUpdatedWithWarning")  # after the push that serves it
    assert "default/backend-tls: it has no data field ca.crt" in event["message"]
    assert len(seen.client) == served
    # ca.crt back: served again.
    f.write("secret", _proxy_ssl_secret("backend-tls", authority("backend-ca").cert_pem))
    eventually(lambda: f.get(HOST, "/").status == 200, 60, "the CA back")
    f.last_event("ann", "AddedOrUpdated")
    assert f.reloads() == 1


def _deep_chain() -> tuple[bytes, bytes, bytes]:
    """(root PEM, the chain a backend presents, its key): NAME's certificate
    under two intermediates, ps-mid-b under ps-mid-a under ps-root."""
    mid_a = authority("ps-mid-a", parent="ps-root")
    key_b = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)

    def cert(subject: str, key: Any, issuer: Issued, ca: bool) -> x509.Certificate:
        b = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(issuer.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
        )
        if ca:
            b = b.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        else:
            b = b.add_extension(x509.SubjectAlternativeName([x509.DNSName(subject)]), False)
        return b.sign(issuer.key, hashes.SHA256())

    mid_b = Issued(cert("ps-mid-b", key_b, mid_a, ca=True), key_b)
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    leaf = Issued(cert(NAME, leaf_key, mid_b, ca=False), leaf_key)
    chain = leaf.cert_pem + mid_b.cert_pem + mid_a.cert_pem
    return authority("ps-root").cert_pem, chain, leaf.key_pem


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_proxy_ssl_verify_depth(ferryman: Ferryman, tmp_path: Path) -> None:
    """A backend two intermediates below the Secret's CA: ingress-nginx's default
    depth (1) is 502, proxy-ssl-verify-depth 2 serves it (NGINX's
    proxy_ssl_verify_depth: the intermediates counted, not the trusted root)."""
    root, chain, key = _deep_chain()
    with chain_backend(tmp_path, chain, key) as peer:
        f = ferryman
        f.write("svc", service_with_backends("app", [peer]))
        f.write("secret", _proxy_ssl_secret("root", root))
        f.write("doc0", annotated(_verified("root")))
        f.start()
        assert f.get(HOST, "/").status == 502
        f.write("doc0", annotated(_verified("root", **{P + "proxy-ssl-verify-depth": "2"})))
        eventually(lambda: f.get(HOST, "/").status == 200, 60, "depth 2")
        assert f.reloads() == 1
