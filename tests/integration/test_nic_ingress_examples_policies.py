"""NIC's Ingress examples with Policies (``nginx.org/policies``: cors,
ingress-mtls, egress-mtls, external-auth, external-auth-mergeable) and with
the rate-limit, proxy-redirect and session-persistence annotations
(../shared/vendor/nic-examples-v5.5.4/ingress-resources), applied unchanged
through real NGINX with real backends and auth services. The Secrets NIC's
``make secrets`` generates are made here; the examples' Deployments are test
backends behind Services of their names. The other examples:
tests/integration/test_nic_ingress_examples_more.py."""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from typing import Any

from testkit.egress import Seen, _backend, _client_secret, _Peer
from testkit.external_auth import AuthService
from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    ingress,
    path,
    rule,
    service_with_backends,
    tls_secret,
)
from testkit.mtls import CERT_ERROR, NO_CERT, mtls_get
from testkit.nic_ingress_examples import EXAMPLES, HOST, _cafe, example, last_event
from testkit.nic_policy_examples import PREFLIGHT
from testkit.pki import authority, ca_secret, issue
from testkit.sticky import assert_cafe_sessions

BASIC_FOO_BAR = {"Authorization": "Basic Zm9vOmJhcg=="}  # foo:bar, the README's


def _cafe_tls(f: Ferryman, backends: Backends) -> None:
    _cafe(f, backends)
    f.write("tls", tls_secret("tls-secret", [HOST]))


def test_cors(ferryman: Ferryman, backends: Backends) -> None:
    """README: a preflight to /tea/ from https://app.example.com answers 204 with
    the CORS headers; an actual POST reaches tea with them; a preflight to
    /coffee/ from https://example.com answers 204 without
    Access-Control-Allow-Origin."""
    f = ferryman
    _cafe_tls(f, backends)
    example(f, "cors", "cors-policy.yaml", "cafe-ingress.yaml")
    f.start()
    want = {
        "access-control-allow-origin": "https://app.example.com",
        "access-control-allow-methods": "GET, POST, PUT, DELETE, OPTIONS",
        "access-control-allow-headers": "Content-Type, Authorization, X-Requested-With, X-API-Key",
        "access-control-allow-credentials": "true",
        "access-control-expose-headers": (
            "X-Total-Count, X-Page-Size, X-RateLimit-Remaining, X-RateLimit-Reset"
        ),
        "access-control-max-age": "3600",
        "vary": "Origin",
    }
    r = f.get(HOST, "/tea/", https=True, method="OPTIONS", headers=PREFLIGHT)
    assert r.status == 204
    assert {k: r.headers.get(k) for k in want} == want
    r = f.get(HOST, "/tea/", https=True, method="POST", headers=PREFLIGHT)
    assert r.served_by == "tea"
    assert {k: r.headers.get(k) for k in want} == want
    other = {**PREFLIGHT, "Origin": "https://example.com"}
    r = f.get(HOST, "/coffee/", https=True, method="OPTIONS", headers=other)
    assert r.status == 204
    assert "access-control-allow-origin" not in r.headers
    assert r.headers["access-control-allow-methods"] == want["access-control-allow-methods"]
    assert last_event(f, "cafe-ingress")["reason"] == "AddedOrUpdated"
    assert f.reloads() == 1


def test_ingress_mtls(ferryman: Ferryman, backends: Backends, tmp_path: Path) -> None:
    """README: without a client certificate, 400 "No required SSL certificate
    was sent"; with one the CA in ingress-mtls-secret signed, tea answers; one
    of another CA gets 400 "The SSL certificate error"."""
    f = ferryman
    _cafe_tls(f, backends)
    f.write("ca", ca_secret("ingress-mtls-secret", authority("nic-ingress-ca").cert_pem))
    example(f, "ingress-mtls", "ingress-mtls-policy.yaml", "cafe-ingress.yaml")
    f.start()
    code, body = mtls_get(f, tmp_path, HOST, None, "/tea")
    assert code == 400 and NO_CERT in body
    client = issue("nic-ingress-ca", "client")
    code, body = mtls_get(f, tmp_path, HOST, client, "/tea")
    assert (code, json.loads(body)["name"]) == (200, "tea")
    code, body = mtls_get(f, tmp_path, HOST, client, "/coffee")
    assert (code, json.loads(body)["name"]) == (200, "coffee")
    code, body = mtls_get(f, tmp_path, HOST, issue("elsewhere-ca", "x"), "/tea")
    assert code == 400 and CERT_ERROR in body
    assert last_event(f, "cafe-ingress")["reason"] == "AddedOrUpdated"
    assert f.reloads() == 1


def test_egress_mtls(ferryman: Ferryman, tmp_path: Path) -> None:
    """The example unchanged: the backend, which requires a client certificate of
    the CA, gets egress-mtls-secret's (and sslName as SNI); its own certificate is
    verified against egress-trusted-ca-secret (verifyServer), so that Secret
    holding another CA makes the host 502, with no reload."""
    f = ferryman
    seen = Seen()
    httpd = _backend(tmp_path, seen)
    try:
        f.extra_args += ["--ingress-class", "nginx"]
        peer = _Peer(int(httpd.server_address[1]))
        f.write("secure", service_with_backends("secure-app", [peer], port=8443))
        f.write("egress-mtls-secret", _client_secret("egress-mtls-secret", "webapp-client"))
        trusted = "egress-trusted-ca-secret"
        f.write(trusted, ca_secret(trusted, authority("backend-ca").cert_pem))
        example(f, "egress-mtls", "egress-mtls.yaml", "ingress.yaml")
        f.start()
        r = f.get("webapp.example.com", "/")
        assert r.status == 200, r.text
        assert (seen.client, seen.sni) == (["webapp-client"], ["secure-app.example.com"])
        assert last_event(f, "webapp-ingress")["reason"] == "AddedOrUpdated"
        f.write(trusted, ca_secret(trusted, authority("egress-ca").cert_pem))
        eventually(lambda: f.get("webapp.example.com", "/").status == 502, 60, "502")
        assert f.reloads() == 1
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_egress_mtls_client_certificate(ferryman: Ferryman, tmp_path: Path) -> None:
    """The example's Ingress and secrets with its Policy minus verifyServer: the
    backend, which requires a client certificate of the CA, gets
    egress-mtls-secret's and answers "hello"."""
    f = ferryman
    seen = Seen()
    httpd = _backend(tmp_path, seen)
    try:
        f.extra_args += ["--ingress-class", "nginx"]
        peer = _Peer(int(httpd.server_address[1]))
        f.write("secure", service_with_backends("secure-app", [peer], port=8443))
        f.write("egress-mtls-secret", _client_secret("egress-mtls-secret", "webapp-client"))
        policy = (EXAMPLES / "egress-mtls" / "egress-mtls.yaml").read_text()
        without = policy.replace("    trustedCertSecret: egress-trusted-ca-secret\n", "")
        without = without.replace("    verifyServer: on\n", "").replace("    verifyDepth: 2\n", "")
        assert "verify" not in without
        f.write_text("egress-mtls.yaml", without)
        example(f, "egress-mtls", "ingress.yaml")
        f.start()
        r = f.get("webapp.example.com", "/")
        assert r.status == 200, r.text
        assert seen.client == ["webapp-client"]
        assert seen.sni == ["secure-app.example.com"]  # sslName, with serverName on
        assert last_event(f, "webapp-ingress")["reason"] == "AddedOrUpdated"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_external_auth(ferryman: Ferryman, backends: Backends) -> None:
    """README: without credentials 401 "401 Authorization Required"; with foo:bar
    tea and coffee answer. basic-auth-svc is a TLS auth service on port 443
    (the Policy's sslEnabled) accepting foo:bar, as the example's htpasswd."""
    f = ferryman
    auth = AuthService("basic-auth", tls=True)
    try:
        _cafe_tls(f, backends)
        f.write(
            "auth", service_with_backends("basic-auth-svc", [auth], port=443, port_name="https")
        )
        example(f, "external-auth", "basic-auth-policy.yaml", "cafe-ingress.yaml")
        f.start()
        r = f.get(HOST, "/tea", https=True)
        assert r.status == 401 and "401 Authorization Required" in r.text
        assert f.get(HOST, "/tea", https=True, headers=BASIC_FOO_BAR).served_by == "tea"
        assert f.get(HOST, "/coffee", https=True, headers=BASIC_FOO_BAR).served_by == "coffee"
        wrong = {"Authorization": "Basic Zm9vOmJheg=="}  # foo:baz
        assert f.get(HOST, "/coffee", https=True, headers=wrong).status == 401
        assert auth.seen[-1]["path"] == "/auth"
        assert last_event(f, "cafe-ingress")["reason"] == "AddedOrUpdated"
        assert f.reloads() == 1
    finally:
        auth.server.shutdown()


def test_external_auth_mergeable(ferryman: Ferryman, backends: Backends) -> None:
    """The example unchanged: the tea minion's Policy verifies basic-auth-svc's
    certificate (sslVerify, external-auth-ca-secret, sniName external-auth-tls),
    so /tea asks it (401 without credentials, tea with foo:bar); a service whose
    certificate that CA did not sign fails the subrequest (500). The coffee
    minion's oauth2-proxy-svc is not running here (the sign-in flow needs
    GitHub): 500, as auth_request answers a failed subrequest."""
    f = ferryman
    cert = issue("auth-ca", "external-auth-tls", server=True)
    auth = AuthService("basic-auth", tls=True, cert=(cert.key_pem, cert.cert_pem))
    try:
        _cafe_tls(f, backends)
        f.write(
            "auth", service_with_backends("basic-auth-svc", [auth], port=443, port_name="https")
        )
        f.write("ca", ca_secret("external-auth-ca-secret", authority("auth-ca").cert_pem))
        example(
            f,
            "external-auth-mergeable",
            "basic-auth-policy.yaml",
            "oauth2-policy.yaml",
            "cafe-ingress-master.yaml",
            "tea-minion.yaml",
            "coffee-minion.yaml",
        )
        f.start()
        r = f.get(HOST, "/tea", https=True)
        assert r.status == 401 and "401 Authorization Required" in r.text
        assert f.get(HOST, "/tea", https=True, headers=BASIC_FOO_BAR).served_by == "tea"
        assert f.get(HOST, "/coffee", https=True, headers=BASIC_FOO_BAR).status == 500
        assert f.get(HOST, "/milk", https=True).status == 404
        f.write("ca", ca_secret("external-auth-ca-secret", authority("other-ca").cert_pem))
        eventually(
            lambda: f.get(HOST, "/tea", https=True, headers=BASIC_FOO_BAR).status == 500, 60, "CA"
        )
        assert f.reloads() == 1
    finally:
        auth.server.shutdown()


def test_external_auth_mergeable_without_ssl_verify(ferryman: Ferryman, backends: Backends) -> None:
    """The example's master and tea minion, its basic-auth Policy without the
    sslVerify fields: /tea asks basic-auth-svc (TLS, port 443) as README step
    8 says (401 without credentials, tea with foo:bar); /coffee, whose minion is
    not applied here, answers 404."""
    f = ferryman
    auth = AuthService("basic-auth", tls=True)
    folder = EXAMPLES / "external-auth-mergeable"
    try:
        _cafe_tls(f, backends)
        f.write(
            "auth", service_with_backends("basic-auth-svc", [auth], port=443, port_name="https")
        )
        policy = (folder / "basic-auth-policy.yaml").read_text()
        kept = [
            line
            for line in policy.splitlines(keepends=True)
            if not line.strip().startswith(("sslVerify", "sniName", "trustedCertSecret"))
        ]
        f.write_text("basic-auth-policy.yaml", "".join(kept))
        example(f, "external-auth-mergeable", "cafe-ingress-master.yaml", "tea-minion.yaml")
        f.start()
        r = f.get(HOST, "/tea", https=True)
        assert r.status == 401 and "401 Authorization Required" in r.text
        assert f.get(HOST, "/tea", https=True, headers=BASIC_FOO_BAR).served_by == "tea"
        assert f.get(HOST, "/coffee", https=True, headers=BASIC_FOO_BAR).status == 404
        assert last_event(f, "cafe-ingress-tea-minion")["reason"] == "AddedOrUpdated"
    finally:
        auth.server.shutdown()


def test_rate_limit(ferryman: Ferryman, backends: Backends) -> None:
    """README: beyond one request per second, 429 Too Many Requests (limit-req-rate
    1r/s keyed by the client's address); the zone is the Ingress's, shared by
    /tea and /coffee; a second later the next request passes again."""
    f = ferryman
    _cafe_tls(f, backends)
    example(f, "rate-limit", "cafe-ingress.yaml")
    f.start()
    assert f.get(HOST, "/coffee", https=True).served_by == "coffee"
    r = f.get(HOST, "/coffee", https=True)
    assert r.status == 429 and "<title>429 Too Many Requests</title>" in r.text
    assert f.get(HOST, "/tea", https=True).status == 429
    time.sleep(1.1)
    assert f.get(HOST, "/tea", https=True).served_by == "tea"
    event = last_event(f, "cafe-ingress")
    assert (event["type"], event["reason"]) == ("Warning", "AddedOrUpdatedWithWarning")
    assert event["message"].endswith(
        "nginx.org/limit-req-zone-size: ferryman's limits share one zone (ferryman_limits); ignored"
    )
    assert f.reloads() == 1


class _Redirecting(BaseHTTPRequestHandler):
    """The example's redirect-backend: 301 to its own internal name."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        what = "coffee" if self.path.startswith("/coffee") else "tea"
        self.send_response(301)
        self.send_header("Location", f"http://redirect-backend-svc/v1/{what}")
        # Not the example's: proxy_redirect rewrites Refresh's url= too.
        self.send_header("Refresh", f"5; URL=http://redirect-backend-svc/v1/{what}")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


class RedirectBackend:
    def __init__(self) -> None:
        self.name = "redirect"
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Redirecting)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        Thread(target=self.server.serve_forever, daemon=True).start()


def test_proxy_redirect(ferryman: Ferryman) -> None:
    """README: without annotations the backend's Location
    http://redirect-backend-svc/v1/coffee reaches the client; case 1 (the from/to
    pair) makes it http://cafe.example.com/coffee/coffee, and so does case 2
    (the regex pair, with its capture $2); a Refresh header's URL too, as NGINX's
    proxy_redirect does. No reload for either."""
    f = ferryman
    backend = RedirectBackend()
    folder = EXAMPLES / "proxy-redirect"
    try:
        f.extra_args += ["--ingress-class", "nginx"]
        f.write("redirect", service_with_backends("redirect-backend-svc", [backend]))
        plain = (folder / "ingress-no-redirect.yaml").read_text()
        f.write_text("cafe-ingress.yaml", plain)
        f.start()
        for p in ("/coffee", "/tea"):
            r = f.get(HOST, p)
            assert (r.status, r.headers["location"]) == (301, f"http://redirect-backend-svc/v1{p}")

        def location() -> str | None:
            return f.get(HOST, "/coffee").headers.get("location")

        for case in ("ingress-redirect-from-to.yaml", "ingress-redirect-regex.yaml"):
            f.write_text("cafe-ingress.yaml", (folder / case).read_text())
            eventually(lambda: location() == "http://cafe.example.com/coffee/coffee", 60, case)
            refresh = f.get(HOST, "/coffee").headers["refresh"]
            assert refresh == "5; URL=http://cafe.example.com/coffee/coffee"
            assert f.get(HOST, "/tea").status == 404  # the example's Ingress has /coffee only
            assert last_event(f, "cafe-ingress")["reason"] == "AddedOrUpdated"
            f.write_text("cafe-ingress.yaml", plain)
            eventually(lambda: location() == "http://redirect-backend-svc/v1/coffee", 60, "plain")
        assert f.reloads() == 1
    finally:
        backend.server.shutdown()


def test_session_persistence(ferryman: Ferryman, backends: Backends) -> None:
    """README (nginx.org/sticky-cookie-services, NGINX's sticky cookie): the first
    answer sets srv_id naming the pod that served it (expires 2h, path /tea for
    tea-svc; 1h, /coffee for coffee-svc); a request with the cookie goes to that
    pod every time; without it, requests are balanced as usual."""
    f = ferryman
    _cafe(f, backends)
    f.write("tea2", service_with_backends("tea-svc", [backends.start("tea2")])[1:])
    example(f, "session-persistence", "cafe-ingress-with-session-persistence.yaml")
    f.start()
    assert last_event(f, "cafe-ingress-with-session-persistence")["reason"] == "AddedOrUpdated"
    assert_cafe_sessions(f, HOST)
    stale = f.get(HOST, "/tea", headers={"Cookie": "srv_id=0123"})
    assert stale.served_by in ("tea", "tea2") and "set-cookie" in stale.headers
    assert f.reloads() == 1


def test_proxy_redirect_variables_and_caseless_regex(ferryman: Ferryman) -> None:
    """Not the example's values: the replacement's NGINX variables ($scheme,
    $host) and ``~*`` (caseless) with captures, as NGINX's proxy_redirect."""
    f = ferryman
    backend = RedirectBackend()
    try:
        f.write("redirect", service_with_backends("redirect-backend-svc", [backend]))
        to = "redirect-backend-svc"
        f.write(
            "vars",
            ingress(
                "vars",
                [rule("vars.test", path("/", to))],
                annotations={
                    "nginx.org/proxy-redirect-from": "http://redirect-backend-svc/v1/",
                    "nginx.org/proxy-redirect-to": "$scheme://$host/x/",
                },
            ),
        )
        f.write(
            "caseless",
            ingress(
                "caseless",
                [rule("caseless.test", path("/", to))],
                annotations={
                    "nginx.org/proxy-redirect-from": "~*^HTTP://REDIRECT-backend-svc/v(\\d)/(.*)",
                    "nginx.org/proxy-redirect-to": "/v$1/$2$1",
                },
            ),
        )
        f.start()
        assert f.get("vars.test", "/tea").headers["location"] == "http://vars.test/x/tea"
        assert f.get("caseless.test", "/tea").headers["location"] == "/v1/tea1"
    finally:
        backend.server.shutdown()
