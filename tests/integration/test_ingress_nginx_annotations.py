"""ingress-nginx's ``nginx.ingress.kubernetes.io/*`` annotations on an Ingress of
ferryman's class, through real NGINX and real backends: what a migrating user's
clients and backends see, the Events, and no reload for any of them
(kinds/ingress/parse/ingress_nginx.py)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from testkit.annotated_ingress import HOST, annotated, last, start
from testkit.egress import Seen, _backend, _client_secret, _Peer
from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    ingress,
    path,
    rule,
    service_with_backends,
)
from testkit.vs_policies import libc_hash, secret

P = "nginx.ingress.kubernetes.io/"


def test_timeouts_body_size_and_host_as_ingress_nginx_sets_them(
    either_fast_path: Ferryman, backends: Backends
) -> None:
    f = either_fast_path
    start(
        f,
        backends,
        annotated(
            {
                P + "proxy-read-timeout": "1",
                P + "proxy-body-size": "1k",
                P + "upstream-vhost": "internal.example",
                P + "x-forwarded-prefix": "/shop",
            }
        ),
    )
    assert last(f)["reason"] == "AddedOrUpdated"
    r = f.get(HOST, "/?delay=0.1")
    assert r.served_by == "a"
    assert r.json()["headers"]["host"] == "internal.example"
    assert r.json()["headers"]["x-forwarded-prefix"] == "/shop"
    assert f.get(HOST, "/?delay=2").status == 504  # seconds, as ingress-nginx reads them
    assert f.get(HOST, "/", method="POST", content=b"x" * 1025).status == 413
    # Edited: the new values are live without a reload.
    f.write("doc0", annotated({P + "proxy-read-timeout": "5"}))
    eventually(lambda: f.get(HOST, "/?delay=2").served_by == "a", 60, "longer timeout")
    assert f.get(HOST, "/", method="POST", content=b"x" * 2048).status == 200
    assert f.reloads() == 1


def test_connection_header_and_the_proxy_versions_ingress_nginx_writes(
    either_fast_path: Ferryman, backends: Backends
) -> None:
    """connection-proxy-header replaces the Connection header sent upstream;
    proxy-http-version 1.1 is the default, served; 1.0 is named in a Warning and
    not applied."""
    f = either_fast_path
    start(
        f,
        backends,
        annotated(
            {
                P + "connection-proxy-header": "keep-alive",
                P + "proxy-http-version": "1.0",
            }
        ),
    )
    event = last(f)
    assert event["reason"] == "AddedOrUpdatedWithWarning"
    assert f"{P}proxy-http-version: '1.0' is not served" in event["message"]
    r = f.get(HOST, "/")
    assert r.json()["headers"]["connection"] == "keep-alive"
    assert r.json()["version"] == "HTTP/1.1"
    f.write("doc0", annotated({P + "connection-proxy-header": "close"}))
    eventually(lambda: f.get(HOST, "/").json()["headers"]["connection"] == "close", 60, "close")
    assert f.reloads() == 1


def test_limit_rpm_answers_503_beyond_the_burst(ferryman: Ferryman, backends: Backends) -> None:
    """limit-rpm 1 with limit-burst-multiplier 2: the first request and a burst of
    2 are served at once, the rest of the minute ingress-nginx's 503 (a minute:
    no refill however slow the machine)."""
    f = ferryman
    start(f, backends, annotated({P + "limit-rpm": "1", P + "limit-burst-multiplier": "2"}))
    statuses = [f.get(HOST, "/").status for _ in range(6)]
    assert statuses == [200, 200, 200, 503, 503, 503]
    assert f.reloads() == 1


def test_cookie_affinity_keeps_a_client_on_its_pod(ferryman: Ferryman, backends: Backends) -> None:
    f = ferryman
    start(
        f,
        backends,
        annotated(
            {
                P + "affinity": "cookie",
                P + "session-cookie-name": "route",
                P + "session-cookie-max-age": "3600",
            }
        ),
        names=("a", "b"),
    )
    first = f.get(HOST, "/")
    cookie = first.headers["set-cookie"]
    assert cookie.startswith("route=") and "httponly" in cookie.lower()
    assert "max-age=3600" in cookie.lower()
    value = cookie.split(";")[0]
    for _ in range(8):
        assert f.get(HOST, "/", headers={"Cookie": value}).served_by == first.served_by
    assert f.reloads() == 1


def test_a_snippet_rejects_the_ingress_and_others_keep_serving(
    ferryman: Ferryman, backends: Backends
) -> None:
    f = ferryman
    start(
        f,
        backends,
        annotated({P + "configuration-snippet": 'more_set_headers "X-Frame-Options: DENY";'}),
    )
    event = last(f)
    assert event["reason"] == "Rejected"
    assert f"{P}configuration-snippet: refused: NGINX text" in event["message"]
    assert "nginx.org/proxy-set-headers" in event["message"]
    assert f.get(HOST, "/").status == 404
    # Without the snippet (its header as nginx.org/add-header would be): served.
    f.write("doc0", annotated({"nginx.org/add-header": "X-Frame-Options: DENY"}))
    eventually(lambda: f.get(HOST, "/").served_by == "a", 60, "served without the snippet")
    assert f.get(HOST, "/").headers["x-frame-options"] == "DENY"


def test_warnings_for_misspelt_unapplied_and_overridden_annotations(
    ferryman: Ferryman, backends: Backends
) -> None:
    f = ferryman
    start(
        f,
        backends,
        annotated(
            {
                P + "proxy-conect-timeout": "3",
                P + "mirror-target": "http://mirror",
                P + "proxy-body-size": "1k",
                "nginx.org/client-max-body-size": "2k",
                P + "proxy-send-timeout": "10s",
            }
        ),
    )
    event = last(f)
    assert event["reason"] == "AddedOrUpdatedWithWarning"
    message = event["message"]
    assert f"{P}proxy-conect-timeout is not an ingress-nginx annotation (misspelt?)" in message
    assert f"{P}mirror-target is not applied by ferryman yet" in message
    assert f"{P}proxy-body-size is not applied: nginx.org/client-max-body-size is set" in message
    assert f"{P}proxy-send-timeout: '10s' must be a whole number of seconds" in message
    # The nginx.org value is the one served.
    assert f.get(HOST, "/", method="POST", content=b"x" * 1500).status == 200
    assert f.get(HOST, "/", method="POST", content=b"x" * 2049).status == 413


def test_source_ranges_deny_first_then_allow(
    either_fast_path: Ferryman, backends: Backends
) -> None:
    """The client is 127.0.0.1: let in by 127.0.0.0/8, kept out when the
    denylist names it too (ingress-nginx denies first), 403 as ingress-nginx."""
    f = either_fast_path
    start(f, backends, annotated({P + "whitelist-source-range": "10.0.0.0/8"}))
    assert f.get(HOST, "/").status == 403
    f.write("doc0", annotated({P + "whitelist-source-range": "10.0.0.0/8, 127.0.0.0/8"}))
    eventually(lambda: f.get(HOST, "/").served_by == "a", 60, "allowed")
    f.write(
        "doc0",
        annotated(
            {
                P + "whitelist-source-range": "127.0.0.0/8",
                P + "denylist-source-range": "127.0.0.1",
            }
        ),
    )
    eventually(lambda: f.get(HOST, "/").status == 403, 60, "denied first")
    f.write("doc0", annotated({P + "denylist-source-range": "127.0.0.2/32"}))
    eventually(lambda: f.get(HOST, "/").served_by == "a", 60, "another address denied")
    assert f.reloads() == 1


def test_an_invalid_source_range_rejects_rather_than_opens(
    ferryman: Ferryman, backends: Backends
) -> None:
    f = ferryman
    start(f, backends, annotated({P + "whitelist-source-range": "10.0.0.0/8,office"}))
    event = last(f)
    assert event["reason"] == "Rejected"
    assert (
        f"{P}whitelist-source-range: 'office' is not an address or CIDR block" in (event["message"])
    )
    assert f.get(HOST, "/").status == 404


def test_cors_preflight_and_headers_with_ingress_nginx_defaults(
    ferryman: Ferryman, backends: Backends
) -> None:
    f = ferryman
    start(
        f,
        backends,
        annotated(
            {
                P + "enable-cors": "true",
                P + "cors-allow-origin": "https://app.example.com, https://*.example.org",
                P + "cors-expose-headers": "X-Total",
            }
        ),
    )
    preflight = f.get(
        HOST,
        "/",
        method="OPTIONS",
        headers={"Origin": "https://app.example.com", "Access-Control-Request-Method": "PUT"},
    )
    assert preflight.status == 204
    assert preflight.headers["access-control-allow-origin"] == "https://app.example.com"
    assert preflight.headers["access-control-allow-methods"] == (
        "GET, PUT, POST, DELETE, PATCH, OPTIONS"
    )
    assert preflight.headers["access-control-allow-credentials"] == "true"
    assert preflight.headers["access-control-max-age"] == "1728000"
    r = f.get(HOST, "/", headers={"Origin": "https://shop.example.org"})
    assert r.served_by == "a"
    assert r.headers["access-control-allow-origin"] == "https://shop.example.org"
    assert r.headers["access-control-expose-headers"] == "X-Total"
    other = f.get(HOST, "/", headers={"Origin": "https://evil.test"})
    assert other.served_by == "a" and "access-control-allow-origin" not in other.headers
    assert f.reloads() == 1


def test_basic_auth_from_a_nic_htpasswd_secret(ferryman: Ferryman, backends: Backends) -> None:
    f = ferryman
    f.write(
        "users",
        secret(
            "users", "nginx.org/htpasswd", {"htpasswd": f"ann:{libc_hash('pw', '$6$')}\n".encode()}
        ),
    )
    start(
        f,
        backends,
        annotated(
            {P + "auth-type": "basic", P + "auth-secret": "users", P + "auth-realm": "Staff"}
        ),
    )
    denied = f.get(HOST, "/")
    assert denied.status == 401
    assert denied.headers["www-authenticate"] == 'Basic realm="Staff"'
    token = base64.b64encode(b"ann:pw").decode()
    assert f.get(HOST, "/", headers={"Authorization": f"Basic {token}"}).served_by == "a"
    # ingress-nginx's own Secret layout (key "auth", Opaque) is not read: closed, not open.
    f.write("users", secret("users", "Opaque", {"auth": b"ann:x\n"}))
    eventually(
        lambda: f.get(HOST, "/", headers={"Authorization": f"Basic {token}"}).status == 500,
        60,
        "closed",
    )
    assert f.reloads() == 1


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_source_ranges_are_enforced_on_every_server(ferryman: Ferryman, backends: Backends) -> None:
    """Enforced on NGINX 1.22, 1.30 and Angie alike (by ngx_http_ferryman_module:
    test_vs_fast_access.py)."""
    f = ferryman
    start(f, backends, annotated({P + "whitelist-source-range": "10.0.0.0/8"}))
    r = f.get(HOST, "/")
    assert (r.status, last(f)["reason"]) == (403, "AddedOrUpdated")
    assert f.reloads() == 1


def test_class_nginx_with_ingress_nginxs_ingressclass_is_served_when_asked(
    ferryman: Ferryman, backends: Backends
) -> None:
    """A migrating cluster keeps ingress-nginx's IngressClass (its spec.controller,
    k8s.io/ingress-nginx, cannot be changed): `--ingress-class nginx` serves the
    class's Ingresses, those naming it, those of the legacy annotation and, as it
    is the default class, those naming none."""
    f = ferryman
    f.extra_args += ["--ingress-class", "nginx"]
    f.write(
        "class",
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "IngressClass",
            "metadata": {
                "name": "nginx",
                "annotations": {"ingressclass.kubernetes.io/is-default-class": "true"},
            },
            "spec": {"controller": "k8s.io/ingress-nginx"},
        },
    )
    f.write("svc", service_with_backends("app", [backends.start("a")]))
    f.write("named", ingress("named", [rule("named.test", path("/", "app"))], class_name="nginx"))
    f.write("none", ingress("none", [rule("none.test", path("/", "app"))], class_name=None))
    f.write(
        "legacy",
        ingress(
            "legacy",
            [rule("legacy.test", path("/", "app"))],
            class_name=None,
            annotations={"kubernetes.io/ingress.class": "nginx"},
        ),
    )
    f.write("other", ingress("other", [rule("other.test", path("/", "app"))]))
    f.start()
    for host in ("named.test", "none.test", "legacy.test"):
        assert f.get(host, "/").served_by == "a", host
    assert f.get("other.test", "/").status == 404  # class ferryman: not the one served


def test_backend_https_with_a_client_certificate(ferryman: Ferryman, tmp_path: Path) -> None:
    """backend-protocol HTTPS with proxy-ssl-secret and proxy-ssl-name: the
    backend that requires a client certificate sees the Secret's, and the name
    as SNI; proxy-ssl-verify on without proxy-ssl-secret (no CAs to verify
    with) is refused rather than served unverified (verifying:
    test_ingress_nginx_proxy_ssl.py)."""
    f = ferryman
    seen = Seen()
    httpd = _backend(tmp_path, seen)
    try:
        f.write("svc", service_with_backends("app", [_Peer(int(httpd.server_address[1]))]))
        f.write("secret", _client_secret("client", "shop-client"))
        tls = {
            P + "backend-protocol": "HTTPS",
            P + "proxy-ssl-secret": "default/client",
            P + "proxy-ssl-name": "secure-app.example.com",
            P + "proxy-ssl-server-name": "on",
        }
        f.write("doc0", annotated(tls))
        f.start()
        r = f.get(HOST, "/")
        assert (r.status, r.json()) == (200, {"client": "shop-client"})
        assert seen.sni[-1] == "secure-app.example.com"
        assert last(f)["reason"] == "AddedOrUpdated"
        unverifiable = {**tls, P + "proxy-ssl-verify": "on"}
        del unverifiable[P + "proxy-ssl-secret"]
        f.write("doc0", annotated(unverifiable))
        eventually(lambda: last(f)["reason"] == "Rejected", 60, "refused")
        assert "proxy-ssl-verify: on needs" in last(f)["message"]
        assert f.get(HOST, "/").status == 404
        assert f.reloads() == 1
    finally:
        httpd.shutdown()


def test_auth_url_to_a_cluster_service_with_signin_and_response_headers(
    ferryman: Ferryman, backends: Backends
) -> None:
    """auth-url naming a Service (oauth2-proxy's form): 2xx passes with the auth
    response's X-Auth-Request-User set on the proxied request (a client's own
    value never reaches the backend); 401 is a 302 to auth-signin with rd= the
    original URL; 403 stays 403. An external host rejects the Ingress (fail
    closed). Every edit with no reload."""
    from testkit.external_auth import AuthService

    f = ferryman
    auth = AuthService("auth")
    try:
        f.write("auth", service_with_backends("oauth2-proxy", [auth], port=4180))
        start(
            f,
            backends,
            annotated(
                {
                    P
                    + "auth-url": "http://oauth2-proxy.default.svc.cluster.local:4180/oauth2/auth",
                    P + "auth-signin": "https://login.example/oauth2/start",
                    P + "auth-response-headers": "X-Auth-Request-User",
                }
            ),
        )
        assert last(f)["reason"] == "AddedOrUpdated"
        ok = {"Authorization": "Bearer ok", "X-Auth-Request-User": "mallory"}
        r = f.get(HOST, "/")
        assert r.status == 302
        # ingress-nginx's rd=$pass_access_scheme://$http_host$escaped_request_uri
        assert r.headers["location"] == "https://login.example/oauth2/start?rd=http://ann.test%2F"
        r = f.get(HOST, "/x?y=1", headers=ok)
        assert r.served_by == "a"
        assert r.json()["headers"]["x-auth-request-user"] == "alice"
        assert auth.seen[-1]["path"] == "/oauth2/auth"
        assert f.get(HOST, "/", headers={"Authorization": "Bearer no"}).status == 403
        # oauth2-proxy's documented form: its variables, and rd= named already.
        signin = "https://$host/oauth2/start?rd=$escaped_request_uri"
        f.write(
            "doc0",
            annotated(
                {
                    P + "auth-url": "http://oauth2-proxy.default.svc:4180/oauth2/auth",
                    P + "auth-signin": signin,
                }
            ),
        )
        want = "https://ann.test/oauth2/start?rd=%2Fx%3Fy%3D1"
        eventually(lambda: f.get(HOST, "/x?y=1").headers.get("location") == want, 60, "variables")
        # Without auth-signin: the 401 as is; the short Service forms.
        f.write("doc0", annotated({P + "auth-url": "http://oauth2-proxy:4180/oauth2/auth"}))
        eventually(lambda: f.get(HOST, "/").status == 401, 60, "401 without signin")
        assert f.get(HOST, "/", headers=ok).served_by == "a"
        # A host outside the cluster: rejected, nothing served unauthenticated.
        f.write("doc0", annotated({P + "auth-url": "https://auth.example.com/check"}))
        eventually(lambda: last(f)["reason"] == "Rejected", 60, "rejected")
        assert "is not a Service of the cluster" in last(f)["message"]
        assert f.get(HOST, "/").status != 200
        assert f.reloads() == 1
    finally:
        auth.server.shutdown()


def test_auth_tls_secret_asks_for_client_certificates(
    ferryman: Ferryman, backends: Backends, tmp_path: Path
) -> None:
    """auth-tls-secret (a nginx.org/ca Secret) with auth-tls-verify-client on:
    no certificate 400, one of the CA served, another CA's 400; optional lets a
    client without one through; an unknown verify value rejects the Ingress.
    No reload."""
    from testkit.harness import tls_secret
    from testkit.mtls import CERT_ERROR, NO_CERT, mtls_get
    from testkit.pki import authority, ca_secret, issue

    f = ferryman
    f.write("tls", tls_secret("ann-tls", [HOST]))
    f.write("ca", ca_secret("client-ca", authority("ingress-nginx-ca").cert_pem))
    tls = [{"hosts": [HOST], "secretName": "ann-tls"}]
    a = {P + "auth-tls-secret": "default/client-ca", P + "auth-tls-verify-client": "on"}
    start(f, backends, annotated(a, tls=tls))
    assert last(f)["reason"] == "AddedOrUpdated"
    code, body = mtls_get(f, tmp_path, HOST, None, "/")
    assert code == 400 and NO_CERT in body
    code, body = mtls_get(f, tmp_path, HOST, issue("ingress-nginx-ca", "client"), "/")
    assert code == 200
    code, body = mtls_get(f, tmp_path, HOST, issue("other-ca", "x"), "/")
    assert code == 400 and CERT_ERROR in body
    f.write("doc0", annotated({**a, P + "auth-tls-verify-client": "optional"}, tls=tls))
    eventually(lambda: mtls_get(f, tmp_path, HOST, None, "/")[0] == 200, 60, "optional")
    f.write("doc0", annotated({**a, P + "auth-tls-verify-client": "maybe"}, tls=tls))
    eventually(lambda: last(f)["reason"] == "Rejected", 60, "rejected")
    assert "auth-tls-verify-client" in last(f)["message"]
    assert f.reloads() == 1
