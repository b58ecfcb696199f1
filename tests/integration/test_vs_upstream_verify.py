"""The upstream's certificate verified, as NIC's proxy_ssl_verify does it, with no
reload: egressMTLS ``verifyServer`` (``trustedCertSecret``, ``verifyDepth``,
``serverName``, ``sslName``) and externalAuth ``sslVerify`` (``trustedCertSecret``,
``sslVerifyDepth``, ``sniName``), through ferryman and real NGINX to real TLS
servers whose certificates the tests make. A certificate that verifies is
served; one that does not (another CA, another name, a chain deeper than the
depth) fails as NGINX fails it: 502 for a route's upstream, 500 for an auth
subrequest (auth_request's answer to a failed subrequest)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testkit.egress import (
    Seen,
    _client_secret,
    _Peer,
    chain_backend,
    client_cert_backend,
    ok_backend,
)
from testkit.external_auth import AuthService
from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    service_with_backends,
    without_fast_module,
)
from testkit.pki import authority, ca_secret, issue
from testkit.virtualservers import start_with_backends, to, vs

NAME = "secure-app.example.com"  # the name testkit.egress's backend holds


def _egress(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "Policy",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"egressMTLS": {"tlsSecret": "client", **spec}},
    }


def _verify(name: str, ca: str, **spec: Any) -> dict[str, Any]:
    return _egress(name, trustedCertSecret=ca, verifyServer=True, **spec)


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[tuple[_Peer, Seen]]:
    with client_cert_backend(tmp_path) as served:
        yield served


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_verify_server_serves_a_verified_backend_and_502s_the_others(
    ferryman: Ferryman, backend: tuple[_Peer, Seen]
) -> None:
    """NIC's egress-mtls example's Policy (verifyServer, serverName, sslName) is
    served, the backend seeing the client certificate and the SNI name; a CA that
    did not sign the backend's certificate, or a name it does not hold, is 502 (the
    backend never gets the request); serverName off verifies the name without
    sending it. A corrected CA Secret is served with no reload."""
    f = ferryman
    peer, seen = backend
    f.write("svc", service_with_backends("app", [peer]))
    f.write("client", _client_secret("client", "alice"))
    f.write("ca", ca_secret("backend-ca", authority("backend-ca").cert_pem))
    f.write("other", ca_secret("other-ca", authority("other-ca").cert_pem))
    f.write("p1", _verify("ok", "backend-ca", serverName=True, sslName=NAME, verifyDepth=2))
    f.write("p2", _verify("bad-ca", "other-ca", serverName=True, sslName=NAME))
    f.write("p3", _verify("bad-name", "backend-ca", serverName=True, sslName="other.example.com"))
    f.write("p4", _verify("no-sni", "backend-ca", sslName=NAME))
    f.write("p5", _verify("no-name", "backend-ca"))
    upstream = {"name": "up", "service": "app", "port": 80, "tls": {"enable": True}}
    routes = [
        {"path": f"/{p}", "action": {"pass": "up"}, "policies": [{"name": p}]}
        for p in ("ok", "bad-ca", "bad-name", "no-sni", "no-name")
    ]
    f.write("vs", vs("m", "m.test", routes, [upstream]))
    f.start()
    assert f.get("m.test", "/ok").status == 200
    assert (seen.client[-1], seen.sni[-1]) == ("alice", NAME)
    served = len(seen.client)
    assert f.get("m.test", "/bad-ca").status == 502
    assert f.get("m.test", "/bad-name").status == 502
    # NIC's default name is its upstream's internal one, which no certificate holds.
    assert f.get("m.test", "/no-name").status == 502
    assert len(seen.client) == served  # no request reached the backend
    assert f.get("m.test", "/no-sni").status == 200
    assert seen.sni[-1] is None
    log = f.log_path.read_text(errors="replace")
    assert "upstream SSL certificate verify error" in log
    assert "upstream SSL certificate does not match" in log
    # The other CA Secret now holds the backend's CA: served, no reload.
    f.write("other", ca_secret("other-ca", authority("backend-ca").cert_pem))
    eventually(lambda: f.get("m.test", "/bad-ca").status == 200, 60, "the corrected CA")
    assert f.get("m.test", "/ok").status == 200
    assert f.reloads() == 1


def test_verify_depth(ferryman: Ferryman, tmp_path: Path) -> None:
    """A backend under an intermediate CA (it presents the intermediate): the root
    trusted with verifyDepth 1 (NIC's default) verifies, with verifyDepth 0 it is
    502, as NGINX's proxy_ssl_verify_depth (OpenSSL's limit on the intermediates
    above the certificate: the trusted root is not counted)."""
    leaf = issue("mid-ca", NAME, server=True, parent="root-ca")
    with chain_backend(tmp_path, leaf.chain_pem, leaf.key_pem) as peer:
        f = ferryman
        f.write("svc", service_with_backends("app", [peer]))
        f.write("ca", ca_secret("root", authority("root-ca").cert_pem))
        policy = {"trustedCertSecret": "root", "verifyServer": True, "sslName": NAME}
        for name, depth in (("deep", 1), ("shallow", 0)):
            doc = _egress(name, **policy, verifyDepth=depth)
            del doc["spec"]["egressMTLS"]["tlsSecret"]
            f.write(name, doc)
        upstream = {"name": "up", "service": "app", "port": 80, "tls": {"enable": True}}
        routes = [
            {"path": f"/{p}", "action": {"pass": "up"}, "policies": [{"name": p}]}
            for p in ("deep", "shallow")
        ]
        f.write("vs", vs("m", "m.test", routes, [upstream]))
        f.start()
        assert f.get("m.test", "/deep").status == 200
        assert f.get("m.test", "/shallow").status == 502


def test_a_bad_verify_policy_is_rejected_and_the_rest_serves(
    ferryman: Ferryman, backend: tuple[_Peer, Seen]
) -> None:
    """verifyServer without trustedCertSecret is an invalid Policy (NIC's
    message), a trustedCertSecret of the wrong type a Warning naming it: their
    routes answer 500, the VirtualServer is Warning, its other route serves."""
    f = ferryman
    peer, _ = backend
    f.write("svc", service_with_backends("app", [peer]))
    f.write("client", _client_secret("client", "alice"))
    f.write("ca", ca_secret("backend-ca", authority("backend-ca").cert_pem))
    f.write("p1", _verify("ok", "backend-ca", serverName=True, sslName=NAME))
    f.write("p2", _egress("invalid", verifyServer=True))
    f.write("p3", _verify("wrong-type", "client", sslName=NAME))
    upstream = {"name": "up", "service": "app", "port": 80, "tls": {"enable": True}}
    routes = [
        {"path": f"/{p}", "action": {"pass": "up"}, "policies": [{"name": p}]}
        for p in ("ok", "invalid", "wrong-type")
    ]
    f.write("vs", vs("m", "m.test", routes, [upstream]))
    f.start()
    assert f.get("m.test", "/ok").status == 200
    assert f.get("m.test", "/invalid").status == 500
    assert f.get("m.test", "/wrong-type").status == 500
    event = f.last_event("m", "AddedOrUpdatedWithWarning", kind="VirtualServer")
    assert event["type"] == "Warning"
    assert "Policy default/invalid is missing or invalid" in event["message"]
    assert "references a secret default/client of a wrong type" in event["message"]
    policy_event = f.last_event("invalid", "Rejected", kind="Policy")
    assert "trustedCertSecret" in policy_event["message"]


def _auth_policy(name: str, **external: Any) -> dict[str, Any]:
    spec = {"authURI": "/check", "authServiceName": "auth-svc", "authServicePorts": [8443]}
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "Policy",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"externalAuth": {**spec, "sslEnabled": True, **external}},
    }


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_external_auth_ssl_verify(ferryman: Ferryman, backends: Backends) -> None:
    """sslVerify: the auth service's certificate (auth-ca's, for
    auth-svc.default.svc) verified against trustedCertSecret: the auth answers
    decide; another CA or another sniName fails the subrequest (500, as
    auth_request answers a failed one); the name is sent as SNI."""
    cert = issue("auth-ca", "auth-svc.default.svc", server=True)
    auth = AuthService("auth", tls=True, cert=(cert.key_pem, cert.cert_pem))
    try:
        f = ferryman
        f.write("auth", service_with_backends("auth-svc", [auth], port=8443))
        f.write("ca", ca_secret("auth-ca", authority("auth-ca").cert_pem))
        f.write("other", ca_secret("other-ca", authority("other-ca").cert_pem))
        f.write("p1", _auth_policy("ok", sslVerify=True, trustedCertSecret="auth-ca"))
        f.write("p2", _auth_policy("bad-ca", sslVerify=True, trustedCertSecret="other-ca"))
        f.write(
            "p3",
            _auth_policy(
                "bad-name", sslVerify=True, trustedCertSecret="auth-ca", sniName="x.example.com"
            ),
        )
        f.write("p4", _auth_policy("no-verify"))
        routes = [
            {"path": f"/{p}", "action": to("a"), "policies": [{"name": p}]}
            for p in ("ok", "bad-ca", "bad-name", "no-verify")
        ]
        start_with_backends(f, backends, vs("cafe", "cafe.test", routes))
        bearer = {"Authorization": "Bearer ok"}
        assert f.get("cafe.test", "/ok", headers=bearer).served_by == "a"
        assert f.get("cafe.test", "/ok", headers={"Authorization": "Bearer no"}).status == 403
        assert f.get("cafe.test", "/ok").status == 401
        seen = len(auth.seen)
        assert f.get("cafe.test", "/bad-ca", headers=bearer).status == 500
        assert f.get("cafe.test", "/bad-name", headers=bearer).status == 500
        assert len(auth.seen) == seen  # never asked
        # Unverified, as before: its self-made certificate is not checked.
        assert f.get("cafe.test", "/no-verify", headers=bearer).served_by == "a"
        f.write("other", ca_secret("other-ca", authority("auth-ca").cert_pem))
        eventually(lambda: f.get("cafe.test", "/bad-ca", headers=bearer).served_by == "a", 60, "CA")
        assert f.reloads() == 1
    finally:
        auth.server.shutdown()


def test_without_the_module_a_verified_route_answers_500(
    ferryman: Ferryman, backend: tuple[_Peer, Seen], tmp_path: Path
) -> None:
    """NGINX without ngx_http_ferryman_module cannot verify per request: the
    route that must be verified answers 500 (never proxied unverified), the
    others serve."""
    f = ferryman
    f.extra_args += without_fast_module(tmp_path)
    peer, seen = backend
    f.write("svc", service_with_backends("app", [peer]))
    f.write("client", _client_secret("client", "alice"))
    f.write("ca", ca_secret("backend-ca", authority("backend-ca").cert_pem))
    f.write("p1", _verify("verified", "backend-ca", sslName=NAME))
    f.write("p2", _egress("mtls"))
    upstream = {"name": "up", "service": "app", "port": 80, "tls": {"enable": True}}
    routes = [
        {"path": f"/{p}", "action": {"pass": "up"}, "policies": [{"name": p}]}
        for p in ("verified", "mtls")
    ]
    f.write("vs", vs("m", "m.test", routes, [upstream]))
    f.start()
    assert f.get("m.test", "/verified").status == 500
    assert seen.client == []
    assert f.get("m.test", "/mtls").status == 200
    assert seen.client == ["alice"]


def test_protocols_and_ciphers(ferryman: Ferryman, tmp_path: Path) -> None:
    """egressMTLS protocols and ciphers (NGINX's proxy_ssl_protocols and
    proxy_ssl_ciphers) through the same per-request TLS context: a backend
    speaking TLS 1.2 with one cipher is 502 to a Policy offering TLS 1.3 only
    or another cipher, 200 to one offering them; a Policy changed is served
    with no reload."""
    import ssl

    cert = issue("backend-ca", NAME, server=True)
    (tmp_path / "crt.pem").write_bytes(cert.cert_pem)
    (tmp_path / "key.pem").write_bytes(cert.key_pem)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tmp_path / "crt.pem", tmp_path / "key.pem")
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers("ECDHE-ECDSA-AES128-GCM-SHA256")

    def policy(name: str, **spec: Any) -> dict[str, Any]:
        doc = _egress(name, **spec)
        del doc["spec"]["egressMTLS"]["tlsSecret"]
        return doc

    with ok_backend(ctx) as peer:
        f = ferryman
        f.write("svc", service_with_backends("app", [peer]))
        f.write("p1", policy("tls13", protocols="TLSv1.3"))
        f.write("p2", policy("tls12", protocols="TLSv1.2 TLSv1.3"))
        f.write("p3", policy("other-cipher", ciphers="ECDHE-ECDSA-AES256-GCM-SHA384"))
        f.write("p4", policy("cipher", ciphers="ECDHE-ECDSA-AES128-GCM-SHA256"))
        f.write("p5", policy("both", protocols="TLSv1.2", ciphers="ECDHE-ECDSA-AES128-GCM-SHA256"))
        upstream = {"name": "up", "service": "app", "port": 80, "tls": {"enable": True}}
        names = ("tls13", "tls12", "other-cipher", "cipher", "both")
        routes = [
            {"path": f"/{p}", "action": {"pass": "up"}, "policies": [{"name": p}]} for p in names
        ]
        routes.append({"path": "/none", "action": {"pass": "up"}})
        f.write("vs", vs("m", "m.test", routes, [upstream]))
        f.start()
        got = {p: f.get("m.test", f"/{p}").status for p in (*names, "none")}
        assert got == {
            "tls13": 502,
            "tls12": 200,
            "other-cipher": 502,
            "cipher": 200,
            "both": 200,
            "none": 200,
        }
        assert f.last_event("m", "AddedOrUpdated", kind="VirtualServer")["type"] == "Normal"
        f.write("p1", policy("tls13", protocols="TLSv1.2"))
        eventually(lambda: f.get("m.test", "/tls13").status == 200, 60, "TLSv1.2")
        assert f.reloads() == 1
