"""ingress-nginx's auth-url settings beyond the URL (kinds/ingress/parse/
ingress_nginx_auth.py): X-Auth-Request-Redirect, the auth service's Set-Cookie,
the auth answer's cache, keepalive; through real NGINX, a real auth service
and real backends, with no reload for any edit."""

from __future__ import annotations

from testkit.annotated_ingress import HOST, annotated, last, start
from testkit.external_auth import AuthService
from testkit.harness import Backends, Ferryman, eventually, service_with_backends

P = "nginx.ingress.kubernetes.io/"
URL = "http://oauth2-proxy.default.svc:4180/oauth2/auth"


def _cookies(r: object) -> list[str]:
    return [v for k, v in r.headers.items() if k.lower() == "set-cookie"]  # type: ignore[attr-defined]


def test_request_redirect_set_cookie_and_kept_connections(
    ferryman: Ferryman, backends: Backends
) -> None:
    """X-Auth-Request-Redirect is the request's URI (a client's own never
    reaches the service), or auth-request-redirect with its variables filled in;
    the service's Set-Cookie reaches a 2xx/3xx answer, and with
    auth-always-set-cookie a 503 too; connections to the service are kept
    (auth-keepalive is said to be not applied); auth-proxy-set-headers and a
    redirect naming an unknown variable reject the Ingress."""
    f = ferryman
    auth = AuthService("auth")
    try:
        f.write("auth", service_with_backends("oauth2-proxy", [auth], port=4180))
        start(f, backends, annotated({P + "auth-url": URL}))
        assert last(f)["reason"] == "AddedOrUpdated"
        ok = {"Authorization": "Bearer ok", "X-Auth-Request-Redirect": "https://evil.example/"}
        assert f.get(HOST, "/x?y=1", headers=ok).served_by == "a"
        assert auth.seen[-1]["headers"]["x-auth-request-redirect"] == "/x?y=1"
        # The original request, as ingress-nginx's auth location tells it
        # (Authelia's and authentik's auth-request endpoints read these); a
        # client's own X-Original-URL is replaced.
        spoofed = {**ok, "X-Original-URL": "http://evil.example/admin"}
        assert f.get(HOST, "/x?y=1", method="POST", headers=spoofed).served_by == "a"
        told = auth.seen[-1]["headers"]
        assert told["x-original-url"] == f"http://{HOST}/x?y=1"
        assert told["x-original-method"] == "POST"
        assert told["x-sent-from"] == "nginx-ingress-controller"
        # Host: the auth URL's, as ingress-nginx's auth location sends it (a
        # Policy's externalAuth sends the client's, NIC's $host).
        assert told["host"] == "oauth2-proxy.default.svc"
        cookie = {"Authorization": "Bearer cookie"}
        r = f.get(HOST, "/", headers=cookie)
        assert r.served_by == "a"
        assert any("_oauth2_proxy=refreshed" in c for c in _cookies(r))
        r = f.get(HOST, "/?status=503", headers=cookie)
        assert r.status == 503 and not any("_oauth2_proxy" in c for c in _cookies(r))
        # A 401 passes no cookie by default either.
        assert not _cookies(f.get(HOST, "/"))
        # Kept connections: ten requests over far fewer connections.
        before = len(auth.seen)
        for _ in range(10):
            assert f.get(HOST, "/", headers=ok).served_by == "a"
        ports = {s["port"] for s in auth.seen[before:]}
        assert len(ports) <= 4, ports

        f.write(
            "doc0",
            annotated(
                {
                    P + "auth-url": URL,
                    P + "auth-request-redirect": "https://$host/after",
                    P + "auth-always-set-cookie": "true",
                    P + "auth-keepalive": "32",
                }
            ),
        )
        eventually(
            lambda: last(f)["reason"] == "AddedOrUpdatedWithWarning", 60, "keepalive warning"
        )
        assert (
            f"{P}auth-keepalive: '32' is not applied: ferryman always keeps" in (last(f)["message"])
        )
        eventually(
            lambda: any(
                "_oauth2_proxy" in c for c in _cookies(f.get(HOST, "/?status=503", headers=cookie))
            ),
            60,
            "always set cookie",
        )
        assert auth.seen[-1]["headers"]["x-auth-request-redirect"] == "https://ann.test/after"

        f.write("doc0", annotated({P + "auth-url": URL, P + "auth-request-redirect": "$secret"}))
        eventually(lambda: last(f)["reason"] == "Rejected", 60, "rejected redirect")
        assert "auth-request-redirect" in last(f)["message"]
        f.write("doc0", annotated({P + "auth-url": URL, P + "auth-proxy-set-headers": "ns/h"}))
        eventually(lambda: "auth-proxy-set-headers: refused" in last(f)["message"], 60, "refused")
        assert last(f)["reason"] == "Rejected"
        assert f.get(HOST, "/").status != 200
        assert f.reloads() == 1
    finally:
        auth.server.shutdown()
        auth.server.server_close()


def test_auth_answers_cached_by_key_for_the_listed_statuses(
    ferryman: Ferryman, backends: Backends
) -> None:
    """auth-cache-key with auth-cache-duration: a 200 is asked once per key and
    replayed (auth-response-headers too), even once the service is gone; a 403
    (not listed) and a no-store answer are asked every time; another key is
    asked (500 with the service gone)."""
    f = ferryman
    auth = AuthService("auth")
    try:
        f.write("auth", service_with_backends("oauth2-proxy", [auth], port=4180))
        a = {
            P + "auth-url": URL,
            P + "auth-cache-key": "$http_authorization",
            P + "auth-cache-duration": "200 30m",
            P + "auth-response-headers": "X-Auth-Request-User",
        }
        start(f, backends, annotated(a))
        assert last(f)["reason"] == "AddedOrUpdated"

        def asked(headers: dict[str, str], times: int) -> int:
            before = len(auth.seen)
            for _ in range(times):
                f.get(HOST, "/", headers=headers)
            return len(auth.seen) - before

        ok = {"Authorization": "Bearer ok", "X-Auth-Request-User": "mallory"}
        assert asked(ok, 3) == 1
        r = f.get(HOST, "/", headers=ok)
        assert r.served_by == "a" and r.json()["headers"]["x-auth-request-user"] == "alice"
        assert asked({"Authorization": "Bearer no"}, 2) == 2
        assert f.get(HOST, "/", headers={"Authorization": "Bearer no"}).status == 403
        assert asked({"Authorization": "Bearer fresh"}, 2) == 2
        # The service gone (no ready endpoint, as a deleted Deployment).
        f.write("auth", service_with_backends("oauth2-proxy", [auth], not_ready=(auth,), port=4180))
        fresh = {"Authorization": "Bearer fresh"}
        eventually(lambda: f.get(HOST, "/", headers=fresh).status == 500, 60, "service gone")
        r = f.get(HOST, "/", headers=ok)
        assert r.served_by == "a" and r.json()["headers"]["x-auth-request-user"] == "alice"
        # A key with a variable ferryman does not fill in: a Warning, nothing cached.
        f.write("doc0", annotated({**a, P + "auth-cache-key": "$request_body"}))
        eventually(lambda: last(f)["reason"] == "AddedOrUpdatedWithWarning", 60, "warned")
        assert "auth-cache-key" in last(f)["message"]
        eventually(lambda: f.get(HOST, "/", headers=ok).status == 500, 60, "not cached")
        assert f.reloads() == 1
    finally:
        auth.server.shutdown()
        auth.server.server_close()
