"""NIC's authentication examples (../shared/vendor/nic-examples-v5.5.4/custom-resources:
jwt, jwks, ingress-mtls, egress-mtls), their Policies and VirtualServers applied
unchanged, through real NGINX, as their READMEs say (and where ferryman differs,
what it answers instead). The Secrets NIC's ``make secrets`` generates are made
here the same way (hack/secrets-gen: the jwt example's key "fantasticjwt", kid
0001, an HS256 token with its claims)."""

from __future__ import annotations

import json
from pathlib import Path

from testkit.egress import Seen, _backend, _client_secret, _Peer
from testkit.harness import Backends, Ferryman, eventually, service_with_backends, tls_secret
from testkit.jose import jwk_secret, token
from testkit.mtls import CERT_ERROR, NO_CERT, mtls_get
from testkit.nic_fixtures import NIC_EXAMPLES
from testkit.pki import authority, ca_secret, issue
from testkit.vs_policies import last_event

# hack/secrets.json's jwk-secret and its token: HS256, kid 0001.
JWK_SECRET = '{"keys":[{"kty":"oct","kid":"0001","k":"ZmFudGFzdGljand0"}]}'
CLAIMS = {"name": "Quotation System", "iss": "My API Gateway", "sub": "quotes"}


def _example(ferryman: Ferryman, folder: str, *names: str) -> None:
    for name in names:
        ferryman.write_text(f"{folder}-{name}", (NIC_EXAMPLES / folder / name).read_text())


def _webapp(ferryman: Ferryman, backends: Backends) -> None:
    ferryman.write("webapp", service_with_backends("webapp-svc", [backends.start("webapp")]))


def test_jwt(ferryman: Ferryman, backends: Backends) -> None:
    """README: without a valid JWT, 401 Authorization Required; with the token in the
    header ``token``, the webapp answers. (NIC: NGINX Plus only; ferryman: open source.)"""
    _webapp(ferryman, backends)
    ferryman.write("jwk-secret", jwk_secret("jwk-secret", JWK_SECRET))
    _example(ferryman, "jwt", "jwt.yaml", "virtual-server.yaml")
    ferryman.start()
    r = ferryman.get("webapp.example.com", "/")
    assert r.status == 401 and "<title>401 Authorization Required</title>" in r.text
    t = token("HS256", CLAIMS, kid="0001", key=b"fantasticjwt")
    r = ferryman.get("webapp.example.com", "/", headers={"token": t})
    assert (r.status, r.served_by) == (200, "webapp")
    assert last_event(ferryman, "webapp")["reason"] == "AddedOrUpdated"
    assert ferryman.reloads() == 1


def test_jwks_keys_from_a_url_are_refused(ferryman: Ferryman, backends: Backends) -> None:
    """The jwks example fetches keys from Keycloak (``jwksURI``): ferryman takes keys
    from a Secret only, so the Policy is refused with the reason, and its
    VirtualServer answers 500 as NIC does for an invalid policy."""
    _webapp(ferryman, backends)
    _example(ferryman, "jwks", "jwks.yaml", "virtual-server.yaml")
    ferryman.start()
    policy = last_event(ferryman, "jwt-policy", "Policy")
    assert policy["reason"] == "Rejected"
    assert (
        "spec.jwt.jwksURI: Forbidden: not supported by ferryman: keys fetched"
        in (policy["message"])
    )
    assert ferryman.get("webapp.example.com", "/").status == 500
    assert (
        "Policy default/jwt-policy is missing or invalid"
        in (last_event(ferryman, "webapp")["message"])
    )


def test_ingress_mtls(ferryman: Ferryman, backends: Backends, tmp_path: Path) -> None:
    """README: without a client certificate, 400 No required SSL certificate was sent;
    with one the CA in ingress-mtls-secret signed, the webapp answers."""
    _webapp(ferryman, backends)
    ferryman.write("tls-secret", tls_secret("tls-secret", ["webapp.example.com"]))
    ferryman.write(
        "ingress-mtls-secret", ca_secret("ingress-mtls-secret", authority("nic-ca").cert_pem)
    )
    _example(ferryman, "ingress-mtls", "ingress-mtls.yaml", "virtual-server.yaml")
    ferryman.start()
    code, body = mtls_get(ferryman, tmp_path, "webapp.example.com", None)
    assert code == 400 and NO_CERT in body
    code, body = mtls_get(ferryman, tmp_path, "webapp.example.com", issue("nic-ca", "client"))
    assert (code, json.loads(body)["name"]) == (200, "webapp")
    code, body = mtls_get(ferryman, tmp_path, "webapp.example.com", issue("elsewhere", "x"))
    assert code == 400 and CERT_ERROR in body
    assert ferryman.reloads() == 1


def test_egress_mtls_example(ferryman: Ferryman, tmp_path: Path) -> None:
    """The egress-mtls example unchanged: the backend (a TLS server requiring a
    client certificate) gets egress-mtls-secret's certificate and the SNI name
    sslName, and its certificate is verified against egress-trusted-ca-secret
    (verifyServer, verifyDepth 2); that Secret holding another CA makes the
    route 502 (the backend never asked), with no reload."""
    seen = Seen()
    httpd = _backend(tmp_path, seen)
    try:
        peer = _Peer(int(httpd.server_address[1]))
        ferryman.write("secure", service_with_backends("secure-app", [peer], port=8443))
        ferryman.write("egress-mtls-secret", _client_secret("egress-mtls-secret", "client"))
        ferryman.write(
            "egress-trusted-ca-secret",
            ca_secret("egress-trusted-ca-secret", authority("backend-ca").cert_pem),
        )
        _example(ferryman, "egress-mtls", "egress-mtls.yaml", "virtual-server.yaml")
        ferryman.start()
        assert ferryman.get("webapp.example.com", "/").status == 200
        assert (seen.client, seen.sni) == (["client"], ["secure-app.example.com"])
        assert last_event(ferryman, "webapp")["reason"] == "AddedOrUpdated"
        ferryman.write(
            "egress-trusted-ca-secret",
            ca_secret("egress-trusted-ca-secret", authority("elsewhere").cert_pem),
        )
        eventually(lambda: ferryman.get("webapp.example.com", "/").status == 502, 60, "502")
        asked = len(seen.client)
        assert ferryman.get("webapp.example.com", "/").status == 502
        assert len(seen.client) == asked  # the backend never asked
        assert ferryman.reloads() == 1
    finally:
        httpd.shutdown()
        httpd.server_close()
