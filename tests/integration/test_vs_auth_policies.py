"""The jwt and ingressMTLS Policies on VirtualServers through real NGINX, with real
traffic: tokens of each algorithm family, expiry, signatures, kids; client
certificates verified, refused, revoked; NIC's answers and warnings; and no
reload for any change of a Policy or its Secret."""

from __future__ import annotations

import json
import socket
import ssl
import time
from pathlib import Path
from typing import Any

import pytest

from testkit.harness import Backends, Ferryman, eventually, served_by, tls_secret
from testkit.jose import jwk, jwk_secret, jwks, token
from testkit.mtls import CERT_ERROR, NO_CERT, mtls_get
from testkit.pki import Issued, authority, ca_secret, crl_pem, issue
from testkit.virtualservers import start_with_backends, to, vs
from testkit.vs_policies import last_event, policy, rate_limit, refs, status


def bearer(t: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {t}"}


def later(seconds: float = 300) -> int:
    return int(time.time() + seconds)


def test_jwt_policy_enforces_tokens_with_no_reload(ferryman: Ferryman, backends: Backends) -> None:
    keys = jwks(jwk("RS256", "rsa"), jwk("ES384", "ec"), jwk("HS512", "mac"))
    routes = [
        {"path": "/", "action": to("a")},
        {"path": "/header", "action": to("b"), "policies": refs("jwt-header")},
    ]
    start_with_backends(
        ferryman,
        backends,
        jwk_secret("keys", keys),
        policy("jwt", jwt={"realm": "My API", "secret": "keys"}),
        policy("jwt-header", jwt={"realm": "Other", "secret": "keys", "token": "$http_token"}),
        vs("cafe", "cafe.test", routes, policies=refs("jwt")),
    )
    r = ferryman.get("cafe.test", "/")
    assert (r.status, r.headers["www-authenticate"]) == (401, 'Bearer realm="My API"')
    assert "401 Authorization Required" in r.text
    for alg, kid in (("RS256", "rsa"), ("ES384", "ec"), ("HS512", "mac")):
        good = token(alg, {"sub": "u", "exp": later()}, kid=kid)
        assert served_by(ferryman, "cafe.test", "/", headers=bearer(good)) == "a", alg
    refused = {
        "expired": token("RS256", {"exp": later(-5)}, kid="rsa"),
        "not yet valid": token("RS256", {"nbf": later(), "exp": later(600)}, kid="rsa"),
        "bad signature": token("RS256", {"exp": later()}, kid="rsa", seed="stranger"),
        "wrong kid": token("RS256", {"exp": later()}, kid="ec"),
        "unknown kid": token("HS512", {"exp": later()}, kid="nobody"),
    }
    for why, t in refused.items():
        r = ferryman.get("cafe.test", "/", headers=bearer(t))
        assert (r.status, r.headers["www-authenticate"]) == (
            401,
            'Bearer realm="My API",error="invalid_token"',
        ), why
    # The route's own jwt replaces the VirtualServer's: its token in the header "token".
    good = token("ES384", {"exp": later()}, kid="ec")
    assert status(ferryman, "cafe.test", "/header", headers=bearer(good)) == 401
    assert served_by(ferryman, "cafe.test", "/header", headers={"token": good}) == "b"
    assert last_event(ferryman, "cafe")["reason"] == "AddedOrUpdated"

    # The Secret rotated: the old key's tokens are refused, the new key's accepted.
    ferryman.write("doc0", jwk_secret("keys", jwks(jwk("ES384", "ec", seed="new"))))
    eventually(
        lambda: status(ferryman, "cafe.test", "/", headers=bearer(good)) == 401, 60, "rotated"
    )
    fresh = token("ES384", {"exp": later()}, kid="ec", seed="new")
    assert served_by(ferryman, "cafe.test", "/", headers=bearer(fresh)) == "a"
    # The Policy edited: its realm.
    ferryman.write("doc1", policy("jwt", jwt={"realm": "Renamed", "secret": "keys"}))
    eventually(
        lambda: (
            ferryman.get("cafe.test", "/").headers.get("www-authenticate")
            == 'Bearer realm="Renamed"'
        ),
        60,
        "realm",
    )
    assert ferryman.reloads() == 1  # the start-up reload only


def test_jwt_secret_problems_answer_500_with_nics_warning(
    ferryman: Ferryman, backends: Backends
) -> None:
    start_with_backends(
        ferryman,
        backends,
        {**jwk_secret("keys", "{}"), "type": "Opaque"},
        policy("jwt", jwt={"realm": "My API", "secret": "keys"}),
        vs("cafe", "cafe.test", [{"path": "/", "action": to("a")}], policies=refs("jwt")),
    )
    assert status(ferryman, "cafe.test", "/") == 500
    assert last_event(ferryman, "cafe")["message"].endswith(
        "JWT policy default/jwt references a secret default/keys of a wrong type 'Opaque', "
        "must be 'nginx.org/jwk'"
    )
    ferryman.write("doc0", jwk_secret("keys", '{"keys": [{"kty": "oct"}]}'))
    eventually(
        lambda: last_event(ferryman, "cafe")["message"].endswith(
            "JWT policy default/jwt references an invalid secret default/keys: keys[0].k is missing"
        ),
        60,
        "invalid secret",
    )
    assert status(ferryman, "cafe.test", "/") == 500
    ferryman.write("doc0", jwk_secret("keys", jwks(jwk("HS256"))))
    eventually(lambda: status(ferryman, "cafe.test", "/") == 401, 60, "usable")
    assert served_by(ferryman, "cafe.test", "/", headers=bearer(token("HS256", {}))) == "a"
    assert ferryman.reloads() == 1


# ---- ingressMTLS ------------------------------------------------------------------------


def mtls_vs(**policies: Any) -> dict[str, Any]:
    return vs(
        "cafe",
        "cafe.test",
        [{"path": "/", "action": to("a")}],
        tls={"secret": "tls"},
        **policies,
    )


def test_ingress_mtls_verifies_client_certificates_with_no_reload(
    ferryman: Ferryman, backends: Backends, tmp_path: Path
) -> None:
    good, stranger = issue("client-ca", "alice"), issue("other-ca", "mallory")
    start_with_backends(
        ferryman,
        backends,
        tls_secret("tls", ["cafe.test"]),
        ca_secret("client-ca", authority("client-ca").cert_pem),
        policy("mtls", ingressMTLS={"clientCertSecret": "client-ca"}),
        mtls_vs(policies=refs("mtls")),
    )

    def get(client: Issued | None) -> tuple[int, str]:
        return mtls_get(ferryman, tmp_path, "cafe.test", client)

    code, body = get(None)
    assert code == 400 and NO_CERT in body
    code, body = get(stranger)
    assert code == 400 and CERT_ERROR in body
    code, body = get(good)
    assert (code, json.loads(body)["name"]) == (200, "a")
    assert last_event(ferryman, "cafe")["reason"] == "AddedOrUpdated"

    # optional: no certificate is fine, a bad one is not.
    ferryman.write(
        "doc2",
        policy("mtls", ingressMTLS={"clientCertSecret": "client-ca", "verifyClient": "optional"}),
    )
    eventually(lambda: get(None)[0] == 200, 60, "optional")
    assert get(stranger)[0] == 400
    # optional_no_ca: a certificate of an unknown CA passes too.
    ferryman.write(
        "doc2",
        policy(
            "mtls", ingressMTLS={"clientCertSecret": "client-ca", "verifyClient": "optional_no_ca"}
        ),
    )
    eventually(lambda: get(stranger)[0] == 200, 60, "optional_no_ca")
    # off: nothing asked.
    ferryman.write(
        "doc2", policy("mtls", ingressMTLS={"clientCertSecret": "client-ca", "verifyClient": "off"})
    )
    eventually(lambda: get(None)[0] == 200 and get(stranger)[0] == 200, 60, "off")

    # Back to on, and the CA Secret changed: now alice's CA is not trusted, mallory's is.
    ferryman.write("doc2", policy("mtls", ingressMTLS={"clientCertSecret": "client-ca"}))
    ferryman.write("doc1", ca_secret("client-ca", authority("other-ca").cert_pem))
    eventually(lambda: get(good)[0] == 400, 60, "CA rotated")
    assert get(stranger)[0] == 200
    # A CRL revoking mallory's certificate.
    revoked = crl_pem("other-ca", [stranger])
    ferryman.write("doc1", ca_secret("client-ca", authority("other-ca").cert_pem, revoked))
    eventually(lambda: get(stranger)[0] == 400, 60, "revoked")
    assert CERT_ERROR in get(stranger)[1]
    assert ferryman.reloads() == 1  # the start-up reload only


def test_ingress_mtls_depth_and_another_hosts_connection(
    ferryman: Ferryman, backends: Backends, tmp_path: Path
) -> None:
    alice = issue("client-mid", "alice", parent="client-ca")
    start_with_backends(
        ferryman,
        backends,
        tls_secret("tls", ["cafe.test"]),
        tls_secret("tls-open", ["open.test"]),
        ca_secret("client-ca", authority("client-ca").cert_pem),
        policy("mtls", ingressMTLS={"clientCertSecret": "client-ca", "verifyDepth": 0}),
        mtls_vs(policies=refs("mtls")),
        vs("open", "open.test", [{"path": "/", "action": to("b")}], tls={"secret": "tls-open"}),
    )
    # Depth 0: no intermediate between the client's certificate and the CA; alice's
    # has one (OpenSSL's count, as for ssl_verify_depth).
    assert mtls_get(ferryman, tmp_path, "cafe.test", alice)[0] == 400
    ferryman.write(
        "doc3", policy("mtls", ingressMTLS={"clientCertSecret": "client-ca", "verifyDepth": 1})
    )
    eventually(lambda: mtls_get(ferryman, tmp_path, "cafe.test", alice)[0] == 200, 60, "depth")
    # A connection made for open.test may not ask for cafe.test: NGINX's 421.
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    sock = ctx.wrap_socket(
        socket.create_connection(("127.0.0.1", ferryman.https_port), 10),
        server_hostname="open.test",
    )
    sock.sendall(b"GET / HTTP/1.1\r\nHost: cafe.test\r\nConnection: close\r\n\r\n")
    answer = b""
    while chunk := sock.recv(65536):
        answer += chunk
    assert answer.startswith(b"HTTP/1.1 421"), answer[:80]
    assert ferryman.reloads() == 1


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("route", "IngressMTLS policy default/mtls is not allowed in the route context"),
        ("no-tls", "TLS must be enabled for IngressMTLS policy default/mtls"),
        (
            "secret",
            'IngressMTLS policy "default/mtls" references a non-existent secret default/none',
        ),
    ],
)
def test_ingress_mtls_where_nic_refuses_it(
    ferryman: Ferryman, backends: Backends, where: str, message: str
) -> None:
    route: dict[str, Any] = {"path": "/", "action": to("a")}
    spec: dict[str, Any] = {"tls": {"secret": "tls"}, "policies": refs("mtls")}
    secret = "client-ca"
    if where == "route":
        route["policies"] = spec.pop("policies")
    elif where == "no-tls":
        del spec["tls"]
    else:
        secret = "none"
    start_with_backends(
        ferryman,
        backends,
        tls_secret("tls", ["cafe.test"]),
        ca_secret("client-ca", authority("client-ca").cert_pem),
        policy("mtls", ingressMTLS={"clientCertSecret": secret}),
        vs("cafe", "cafe.test", [route], **spec),
    )
    event = last_event(ferryman, "cafe")
    assert event["reason"] == "AddedOrUpdatedWithWarning"
    assert message in event["message"]
    https = where != "no-tls"
    assert ferryman.get("cafe.test", "/", https=https).status == 500


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
def test_ingress_mtls_session_resumption_does_not_outlive_a_ca_change(
    ferryman: Ferryman, backends: Backends, tmp_path: Path, version: ssl.TLSVersion
) -> None:
    """A client certificate's handshake gets no session ticket: a session from
    before the CA Secret changed cannot be resumed past the new CAs."""
    alice = issue("client-ca", "alice")
    start_with_backends(
        ferryman,
        backends,
        tls_secret("tls", ["cafe.test"]),
        ca_secret("client-ca", authority("client-ca").cert_pem),
        policy("mtls", ingressMTLS={"clientCertSecret": "client-ca"}),
        mtls_vs(policies=refs("mtls")),
    )
    (tmp_path / "a.crt").write_bytes(alice.chain_pem)
    (tmp_path / "a.key").write_bytes(alice.key_pem)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = ctx.maximum_version = version
    ctx.load_cert_chain(tmp_path / "a.crt", tmp_path / "a.key")

    def get(session: ssl.SSLSession | None) -> tuple[int, ssl.SSLSocket]:
        raw = socket.create_connection(("127.0.0.1", ferryman.https_port), 10)
        sock = ctx.wrap_socket(raw, server_hostname="cafe.test", session=session)
        sock.sendall(b"GET / HTTP/1.1\r\nHost: cafe.test\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        return int(answer.split(b" ", 2)[1]), sock

    code, first = get(None)
    assert code == 200
    saved = first.session
    assert saved is not None and not saved.has_ticket
    ferryman.write("doc1", ca_secret("client-ca", authority("other-ca").cert_pem))
    eventually(lambda: get(None)[0] == 400, 60, "CA rotated")
    code, again = get(saved)
    assert (code, again.session_reused) == (400, False)


def test_rate_limit_tiers_on_the_jwt_policys_claims(ferryman: Ferryman, backends: Backends) -> None:
    """NIC's rateLimit.condition.jwt (NGINX Plus's auth_jwt_claim_set): the tier
    whose claim matches, read from the route's verified token; a key with
    ${jwt_claim_sub} counts per subject."""
    premium = {"jwt": {"claim": "user.tier", "match": "premium"}}
    basic = {"jwt": {"claim": "user.tier", "match": "basic"}, "default": True}
    per_user = "${jwt_claim_sub}"
    start_with_backends(
        ferryman,
        backends,
        jwk_secret("keys", jwks(jwk("HS256"))),
        policy("jwt", jwt={"realm": "api", "secret": "keys"}),
        rate_limit("premium", key=per_user, rate="10r/s", burst=5, noDelay=True, condition=premium),
        rate_limit("basic", key=per_user, rate="1r/m", condition=basic),
        vs(
            "cafe",
            "cafe.test",
            [{"path": "/", "action": to("a")}],
            policies=refs("jwt", "premium", "basic"),
        ),
    )

    def user(sub: str, tier: str) -> dict[str, str]:
        return bearer(token("HS256", {"sub": sub, "user": {"tier": tier}, "exp": later()}))

    # premium: a burst of 5 more at once; basic (and the default tier): one a minute.
    assert [status(ferryman, "cafe.test", headers=user("p", "premium")) for _ in range(6)] == [
        200
    ] * 6
    assert [status(ferryman, "cafe.test", headers=user("b", "basic")) for _ in range(2)] == [
        200,
        503,
    ]
    # Another subject has its own bucket (the key's ${jwt_claim_sub}).
    assert status(ferryman, "cafe.test", headers=user("c", "basic")) == 200
    # No valid token: the jwt Policy answers 401 whatever the tier.
    assert status(ferryman, "cafe.test") == 401
    assert ferryman.reloads() == 1
