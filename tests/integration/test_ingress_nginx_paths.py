"""ingress-nginx's use-regex, rewrite-target, app-root and permanent/temporal
redirects through real NGINX and real backends, with ingress-nginx's e2e
expectations (test/e2e/annotations/rewrite.go, approot.go, redirect.go):
what the client and the backend see, edits live without a reload
(kinds/ingress/parse/ingress_nginx_paths.py)."""

from __future__ import annotations

from testkit.annotated_ingress import HOST, annotated, last, start
from testkit.harness import Backends, Ferryman, eventually, path

P = "nginx.ingress.kubernetes.io/"


def test_rewrite_target_sends_the_groups_upstream(
    either_fast_path: Ferryman, backends: Backends
) -> None:
    """ingress-nginx's docs/examples/rewrite: /something(/|$)(.*) with /$2."""
    f = either_fast_path
    start(
        f,
        backends,
        annotated(
            {P + "rewrite-target": "/$2"},
            path("/something(/|$)(.*)", "app", "ImplementationSpecific"),
        ),
    )
    assert last(f)["reason"] == "AddedOrUpdated"
    assert f.get(HOST, "/something").json()["path"] == "/"
    assert f.get(HOST, "/something/").json()["path"] == "/"
    assert f.get(HOST, "/something/new").json()["path"] == "/new"
    assert f.get(HOST, "/something/new?x=1").json()["path"] == "/new?x=1"
    # ~* and (?i): case-insensitive, both the location and the rewrite.
    assert f.get(HOST, "/SOMEthing/New").json()["path"] == "/New"
    assert f.get(HOST, "/other").status == 404
    # Edited: a new target is live without a reload.
    f.write(
        "doc0",
        annotated(
            {P + "rewrite-target": "/v2/$2"},
            path("/something(/|$)(.*)", "app", "ImplementationSpecific"),
        ),
    )
    eventually(lambda: f.get(HOST, "/something/new").json()["path"] == "/v2/new", 60, "edit")
    assert f.reloads() == 1


def test_use_regex_with_a_constant_target(either_fast_path: Ferryman, backends: Backends) -> None:
    """rewrite.go: /foo/bar/(.+) with /new/backend/$1; /foo.+ with /new/backend."""
    f = either_fast_path
    start(
        f,
        backends,
        annotated(
            {P + "use-regex": "true", P + "rewrite-target": "/new/backend/$1"},
            path("/foo/bar/(.+)", "app", "ImplementationSpecific"),
        ),
    )
    assert f.get(HOST, "/foo/bar/bar").json()["path"] == "/new/backend/bar"
    f.write(
        "doc0",
        annotated(
            {P + "use-regex": "true", P + "rewrite-target": "/new/backend"},
            path("/foo.+", "app", "ImplementationSpecific"),
        ),
    )
    eventually(lambda: f.get(HOST, "/foo/bar").json()["path"] == "/new/backend", 60, "edit")
    assert f.get(HOST, "/foo").status == 404  # .+ needs one more character
    assert f.reloads() == 1


def test_use_regex_alone_routes_by_the_expressions(
    either_fast_path: Ferryman, backends: Backends
) -> None:
    f = either_fast_path
    start(
        f,
        backends,
        annotated(
            {P + "use-regex": "true"},
            path("/api/v[0-9]+/users$", "app", "ImplementationSpecific"),
        ),
    )
    assert f.get(HOST, "/api/v12/users").json()["path"] == "/api/v12/users"
    assert f.get(HOST, "/API/V1/users").status == 200
    assert f.get(HOST, "/api/vx/users").status == 404
    assert f.get(HOST, "/api/v1/users/1").status == 404
    assert f.reloads() == 1


def test_app_root_redirects_the_root_only(either_fast_path: Ferryman, backends: Backends) -> None:
    """approot.go: GET / answers 302 with Location http://<host>/foo."""
    f = either_fast_path
    start(f, backends, annotated({P + "app-root": "/foo"}))
    r = f.get(HOST, "/")
    assert r.status == 302
    assert r.headers["location"] == f"http://{HOST}/foo"
    assert f.get(HOST, "/foo").json()["path"] == "/foo"
    assert f.reloads() == 1


def test_permanent_and_temporal_redirects(either_fast_path: Ferryman, backends: Backends) -> None:
    """redirect.go: permanent-redirect answers 301 (or its code) on every path;
    temporal-redirect wins over it."""
    f = either_fast_path
    url = "http://redirect.example.com"
    start(
        f,
        backends,
        annotated({P + "permanent-redirect": url}, path("/", "app"), path("/x", "app")),
    )
    for p in ("/something", "/x/y", "/"):
        r = f.get(HOST, p)
        assert (r.status, r.headers["location"]) == (301, url)
    f.write(
        "doc0",
        annotated({P + "permanent-redirect": url, P + "permanent-redirect-code": "308"}),
    )
    eventually(lambda: f.get(HOST, "/something").status == 308, 60, "code 308")
    f.write(
        "doc0",
        annotated(
            {
                P + "permanent-redirect": url,
                P + "temporal-redirect": "https://temp.example.com$request_uri",
            }
        ),
    )
    eventually(lambda: f.get(HOST, "/a?b=1").status == 302, 60, "temporal")
    assert f.get(HOST, "/a?b=1").headers["location"] == "https://temp.example.com/a?b=1"
    assert "temporal-redirect wins" in f.last_event("ann", "AddedOrUpdatedWithWarning")["message"]
    assert f.reloads() == 1


def test_nics_rewrite_target_and_app_root(either_fast_path: Ferryman, backends: Backends) -> None:
    """NIC's nginx.org/rewrite-target (rewrite "<path>" <target> break on a
    plain path; "(?i)^<path>" with path-regex case_insensitive) and
    nginx.org/app-root (server-level 302 for /)."""
    f = either_fast_path
    start(
        f,
        backends,
        annotated(
            {"nginx.org/rewrite-target": "/beans", "nginx.org/app-root": "/coffee"},
            path("/coffee", "app"),
        ),
    )
    assert f.get(HOST, "/coffee").json()["path"] == "/beans"
    assert f.get(HOST, "/coffee/x?y=1").json()["path"] == "/beans?y=1"
    r = f.get(HOST, "/")
    assert (r.status, r.headers["location"]) == (302, f"http://{HOST}/coffee")
    f.write(
        "doc0",
        annotated(
            {"nginx.org/rewrite-target": "/v1/$1", "nginx.org/path-regex": "case_insensitive"},
            path("/tea/(.*)", "app", "ImplementationSpecific"),
        ),
    )
    eventually(lambda: f.get(HOST, "/TEA/green").status == 200, 60, "regex")
    assert f.get(HOST, "/TEA/green").json()["path"] == "/v1/green"
    assert f.reloads() == 1


def test_force_ssl_redirect_without_tls(either_fast_path: Ferryman, backends: Backends) -> None:
    """ingress-nginx's lua_ingress: http answers 308 to https, the request
    URI's trailing slash dropped unless preserve-trailing-slash."""
    f = either_fast_path
    start(f, backends, annotated({P + "force-ssl-redirect": "true"}))
    r = f.get(HOST, "/shop/?a=1")
    assert (r.status, r.headers["location"]) == (308, f"https://{HOST}/shop/?a=1")
    r = f.get(HOST, "/shop/")
    assert (r.status, r.headers["location"]) == (308, f"https://{HOST}/shop")
    f.write(
        "doc0",
        annotated({P + "force-ssl-redirect": "true", P + "preserve-trailing-slash": "true"}),
    )
    eventually(
        lambda: f.get(HOST, "/shop/").headers.get("location") == f"https://{HOST}/shop/",
        60,
        "preserved",
    )
    f.write("doc0", annotated({P + "force-ssl-redirect": "false"}))
    eventually(lambda: f.get(HOST, "/shop/").status == 200, 60, "off")
    assert f.reloads() == 1


def test_server_alias_routes_as_the_host(either_fast_path: Ferryman, backends: Backends) -> None:
    f = either_fast_path
    start(
        f,
        backends,
        annotated({P + "server-alias": "alias.test, other.test"}, path("/shop", "app")),
    )
    for host in (HOST, "alias.test", "other.test"):
        assert f.get(host, "/shop/x").json()["path"] == "/shop/x"
        assert f.get(host, "/elsewhere").status == 404
    f.write("doc0", annotated({P + "server-alias": "alias.test"}, path("/shop", "app")))
    eventually(lambda: f.get("other.test", "/shop").status == 404, 60, "alias removed")
    assert f.get("alias.test", "/shop").status == 200
    assert f.reloads() == 1


def test_from_to_www_redirect(either_fast_path: Ferryman, backends: Backends) -> None:
    """www.<host> answers 308 to <host> (ingress-nginx's redirect server); the
    host itself is served."""
    f = either_fast_path
    start(f, backends, annotated({P + "from-to-www-redirect": "true"}, path("/shop", "app")))
    r = f.get("www." + HOST, "/any/where?x=1")
    assert r.status == 308
    assert r.headers["location"] == f"http://{HOST}:{f.http_port}/any/where?x=1"
    assert f.get(HOST, "/shop").json()["path"] == "/shop"
    f.write("doc0", annotated({}, path("/shop", "app")))
    eventually(lambda: f.get("www." + HOST, "/shop").status == 404, 60, "off")
    assert f.reloads() == 1
