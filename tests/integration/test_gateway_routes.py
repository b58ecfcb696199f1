"""HTTPRoute matches as the data plane serves them (issue 18, before the
Gateway translator): the attachment of real HTTPRoute objects (configs/
gateway_attach.py) encoded as a V record (kinds/gateway/records/routes.py), pushed
into a running ferryman's NGINX, answered by the Lua router in the
specification's order with fall-through, weights and 500s for invalid backends."""

from __future__ import annotations

from typing import Any

from ferryman.configs.model import VirtualHost
from ferryman.configs.routes import encode_host
from ferryman.kinds.gateway.parse.gateway_api import parse_gateway, parse_http_route
from ferryman.kinds.gateway.records.attach import attach
from ferryman.kinds.gateway.records.routes import gateway_record
from testkit.harness import Backend, Backends, Ferryman, eventually

HOST = "gw.example.com"


def _route(name: str, rules: list[dict[str, Any]], age: str = "2026-01-01T00:00:00Z") -> Any:
    parsed = parse_http_route(
        {
            "metadata": {"name": name, "namespace": "default", "creationTimestamp": age},
            "spec": {"parentRefs": [{"name": "gw"}], "hostnames": [HOST], "rules": rules},
        }
    )
    assert parsed.resource is not None, parsed.message()
    return parsed.resource


def _records(routes: list[Any], backends: dict[str, Backend]) -> dict[tuple[str, str], str]:
    gateway = parse_gateway(
        {
            "metadata": {"name": "gw", "namespace": "default"},
            "spec": {
                "gatewayClassName": "ferryman",
                "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
            },
        }
    ).resource
    assert gateway is not None
    att = attach(
        [gateway], routes, [], lambda ns, n: None, lambda ns: {},
        lambda ns, n: n in backends,
    )  # fmt: skip
    record, used = gateway_record(att.table[("default", "gw", "http")][HOST])
    records = {
        ("V", HOST): record,
        ("H", HOST): encode_host(VirtualHost(HOST, (), None)),
    }
    for key in used:
        service = key.partition("/")[2].partition(":")[0]
        records[("E", key)] = f"127.0.0.1#{backends[service].port}"
    return records


def _push(f: Ferryman, records: dict[tuple[str, str], str]) -> None:
    order = {"E": 0, "V": 1, "H": 2}
    lines = [
        f"{k}\t{n}\t{v}" for (k, n), v in sorted(records.items(), key=lambda kv: order[kv[0][0]])
    ]
    r = f.push_lines(lines)
    assert r.status_code == 200, r.text


def _backend(name: str) -> dict[str, Any]:
    return {"name": name, "port": 80}


def test_matches_in_the_specifications_order_with_fall_through(
    ferryman: Ferryman, backends: Backends
) -> None:
    named = {n: backends.start(n) for n in ("exact", "prefix", "header", "root", "query", "re")}
    routes = [
        _route("a", [
            {"matches": [{"path": {"type": "Exact", "value": "/a"}}],
             "backendRefs": [_backend("exact")]},
            {"matches": [{"path": {"type": "PathPrefix", "value": "/a/"}}],
             "backendRefs": [_backend("prefix")]},
        ]),
        # Newer, but a header match outranks a bare prefix of the same length.
        _route("b", [
            {"matches": [{"path": {"type": "PathPrefix", "value": "/a"},
                          "headers": [{"name": "X-Version", "value": "Two"}]}],
             "backendRefs": [_backend("header")]},
            {"matches": [{"path": {"type": "PathPrefix", "value": "/"},
                          "queryParams": [{"name": "q", "value": "1"}]}],
             "backendRefs": [_backend("query")]},
            {"matches": [{"path": {"type": "RegularExpression", "value": "/r[0-9]+"}}],
             "backendRefs": [_backend("re")]},
            {"backendRefs": [_backend("root")]},
        ], age="2026-02-01T00:00:00Z"),
    ]  # fmt: skip
    ferryman.start()
    _push(ferryman, _records(routes, named))

    def by(path: str, **headers: str) -> str | None:
        r = ferryman.get(HOST, path, headers=headers)
        return r.served_by if r.status == 200 else str(r.status)

    eventually(lambda: by("/a") == "exact", 60, "the record live")
    assert by("/a/b") == "prefix"
    assert by("/a") == "exact"  # Exact first, even with the header
    assert by("/a/b", **{"X-Version": "Two"}) == "header"
    assert by("/a/b", **{"X-Version": "two"}) == "prefix"  # values compare case-sensitively
    assert by("/ab") == "root"  # "/a/" is element-wise: not a prefix of /ab
    assert by("/ab?q=1") == "query"  # the header rule falls through, then the query one
    assert by("/r12") == "re" and by("/r12x") == "root"  # a regex matches the whole path
    assert ferryman.reloads() == 1


def test_weights_out_of_their_sum_and_500_for_invalid_backends(
    ferryman: Ferryman, backends: Backends
) -> None:
    named = {n: backends.start(n) for n in ("v1", "v2")}
    routes = [
        _route("w", [
            {"matches": [{"path": {"type": "PathPrefix", "value": "/w"}}],
             "backendRefs": [dict(_backend("v1"), weight=7), dict(_backend("v2"), weight=3),
                             dict(_backend("gone"), weight=0)]},
            {"matches": [{"path": {"type": "PathPrefix", "value": "/half"}}],
             "backendRefs": [dict(_backend("v1"), weight=1), dict(_backend("gone"), weight=1)]},
            {"matches": [{"path": {"type": "PathPrefix", "value": "/none"}}]},
        ]),
    ]  # fmt: skip
    ferryman.start()
    _push(ferryman, _records(routes, named))
    eventually(lambda: ferryman.get(HOST, "/none").status == 500, 60, "the record live")
    seen = [ferryman.get(HOST, "/w").served_by for _ in range(400)]
    # 0.7 of 400 within about 4.5 standard deviations (sd 9.2).
    assert 240 <= seen.count("v1") <= 320 and seen.count("v1") + seen.count("v2") == 400
    statuses = [ferryman.get(HOST, "/half").status for _ in range(200)]
    assert 60 <= statuses.count(500) <= 140 and set(statuses) == {200, 500}


def test_filters_headers_redirects_and_rewrites(ferryman: Ferryman, backends: Backends) -> None:
    named = {"app": backends.start("app")}
    headers_rule = {
        "matches": [{"path": {"type": "PathPrefix", "value": "/headers"}}],
        "filters": [
            {"type": "RequestHeaderModifier", "requestHeaderModifier": {
                "set": [{"name": "X-Set", "value": "set-${host}"}],
                "add": [{"name": "X-Add", "value": "added"}],
                "remove": ["X-Remove"]}},
            {"type": "ResponseHeaderModifier", "responseHeaderModifier": {
                "set": [{"name": "Content-Type", "value": "text/x-set"}],
                "add": [{"name": "X-Answer", "value": "yes"}]}},
        ],
        "backendRefs": [_backend("app")],
    }  # fmt: skip
    redirect_rule = {
        "matches": [{"path": {"type": "PathPrefix", "value": "/old"}}],
        "filters": [{"type": "RequestRedirect", "requestRedirect": {
            "scheme": "https", "hostname": "new.example.com", "statusCode": 301,
            "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/new"}}}],
    }  # fmt: skip
    port_rule = {
        "matches": [{"path": {"type": "Exact", "value": "/port"}}],
        "filters": [{"type": "RequestRedirect", "requestRedirect": {"port": 8443}}],
    }
    rewrite_rule = {
        "matches": [{"path": {"type": "PathPrefix", "value": "/api/v1"}}],
        "filters": [{"type": "URLRewrite", "urlRewrite": {
            "hostname": "internal.example.com",
            "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}}}],
        "backendRefs": [_backend("app")],
    }  # fmt: skip
    full_rule = {
        "matches": [{"path": {"type": "PathPrefix", "value": "/full"}}],
        "filters": [{"type": "URLRewrite", "urlRewrite": {
            "path": {"type": "ReplaceFullPath", "replaceFullPath": "/one"}}}],
        "backendRefs": [_backend("app")],
    }  # fmt: skip
    routes = [_route("f", [headers_rule, redirect_rule, port_rule, rewrite_rule, full_rule])]
    ferryman.start()
    _push(ferryman, _records(routes, named))
    eventually(lambda: ferryman.get(HOST, "/headers").status == 200, 60, "the record live")

    r = ferryman.get(HOST, "/headers", headers={"X-Remove": "gone", "X-Add": "first"})
    seen = r.json()["headers"]
    assert seen["x-set"] == "set-${host}"  # a literal: nothing in it is expanded
    # Added after the client's own (the echo keeps the last of repeated headers).
    assert seen["x-add"] == "added" and "x-remove" not in seen
    assert r.headers["content-type"] == "text/x-set" and r.headers["x-answer"] == "yes"

    r = ferryman.get(HOST, "/old/page?a=1")
    assert (r.status, r.headers["location"]) == (301, "https://new.example.com/new/page?a=1")
    r = ferryman.get(HOST, "/port")
    assert (r.status, r.headers["location"]) == (302, f"http://{HOST}:8443/port")

    r = ferryman.get(HOST, "/api/v1/users?id=3")
    assert r.json()["path"] == "/users?id=3"
    assert r.json()["headers"]["host"] == "internal.example.com"
    assert ferryman.get(HOST, "/full/anything").json()["path"] == "/one"
    assert ferryman.reloads() == 1


def test_cors_filter_answers_preflights_and_marks_answers(
    ferryman: Ferryman, backends: Backends
) -> None:
    named = {"app": backends.start("app")}

    def cors_rule(prefix: str, **cors: Any) -> dict[str, Any]:
        return {
            "matches": [{"path": {"type": "PathPrefix", "value": prefix}}],
            "filters": [{"type": "CORS", "cors": cors}],
            "backendRefs": [_backend("app")],
        }

    routes = [
        _route("c", [
            cors_rule("/listed", allowOrigins=["https://www.foo.com", "https://*.bar.com"],
                      allowMethods=["GET", "OPTIONS"], allowHeaders=["x-header-1"],
                      exposeHeaders=["x-header-3"], allowCredentials=True, maxAge=3600),
            cors_rule("/any", allowOrigins=["*"], allowMethods=["*"], allowHeaders=["*"]),
            cors_rule("/any-credentials", allowOrigins=["*"], allowMethods=["*"],
                      allowHeaders=["*"], allowCredentials=True),
        ]),
    ]  # fmt: skip
    ferryman.start()
    _push(ferryman, _records(routes, named))
    eventually(lambda: ferryman.get(HOST, "/listed").status == 200, 60, "the record live")

    def preflight(path: str, origin: str, **more: str) -> Any:
        asked = {"Origin": origin, "Access-Control-Request-Method": "PUT", **more}
        return ferryman.get(HOST, path, method="OPTIONS", headers=asked)

    # A preflight from a listed origin (or one a wildcard label covers, at any
    # depth) is answered without the backend.
    for origin in ("https://www.foo.com", "https://a.b.bar.com"):
        r = preflight("/listed", origin, **{"Access-Control-Request-Headers": "x-header-1"})
        assert r.status == 204 and r.served_by is None, (origin, r.status)
        assert r.headers["access-control-allow-origin"] == origin
        assert r.headers["access-control-allow-methods"] == "GET, OPTIONS"
        assert r.headers["access-control-allow-headers"] == "x-header-1"
        assert r.headers["access-control-expose-headers"] == "x-header-3"
        assert r.headers["access-control-max-age"] == "3600"
        assert r.headers["access-control-allow-credentials"] == "true"
    # Other origins (another scheme, a port, the bare wildcard domain): their
    # preflights are answered without CORS headers, their requests served
    # without them.
    for origin in ("http://www.foo.com", "https://www.foo.com:8443", "https://bar.com"):
        r = preflight("/listed", origin)
        assert r.status == 204 and r.served_by is None, origin
        assert "access-control-allow-origin" not in r.headers, origin
        r = ferryman.get(HOST, "/listed", headers={"Origin": origin})
        assert r.served_by == "app" and "access-control-allow-origin" not in r.headers, origin
    # An OPTIONS request that is not a preflight is the backend's.
    r = ferryman.get(HOST, "/listed", method="OPTIONS", headers={"Origin": "https://www.foo.com"})
    assert r.served_by == "app"
    # A simple request from a listed origin: the backend's answer with the headers.
    r = ferryman.get(HOST, "/listed", headers={"Origin": "https://www.foo.com"})
    assert r.served_by == "app"
    assert r.headers["access-control-allow-origin"] == "https://www.foo.com"
    assert r.headers["access-control-allow-credentials"] == "true"
    assert r.headers["access-control-expose-headers"] == "x-header-3"
    assert "Origin" in r.headers["vary"]
    # "*" without credentials is "*"; with credentials, the request's own values.
    r = preflight("/any", "https://x.example", **{"Access-Control-Request-Headers": "x-a"})
    assert r.status == 204 and r.headers["access-control-allow-origin"] == "*"
    assert r.headers["access-control-allow-methods"] == "*"
    assert r.headers["access-control-allow-headers"] == "*"
    assert "access-control-allow-credentials" not in r.headers
    r = preflight("/any-credentials", "https://x.example:444",
                  **{"Access-Control-Request-Headers": "x-a, x-b"})  # fmt: skip
    assert r.headers["access-control-allow-origin"] == "https://x.example:444"
    assert r.headers["access-control-allow-methods"] == "PUT"
    assert r.headers["access-control-allow-headers"] == "x-a, x-b"
    # An Origin that is not an origin is never echoed.
    r = preflight("/any-credentials", "https://x.example/<script>")
    assert r.status == 204 and "access-control-allow-origin" not in r.headers


def test_a_path_regex_that_cannot_run_answers_500(ferryman: Ferryman, backends: Backends) -> None:
    """PCRE's match limit reached by backtracking: neither a match nor a miss, so the
    request never falls through to the next rule (docs/operations.md, Regular
    expressions)."""
    named = {n: backends.start(n) for n in ("re", "root")}
    routes = [
        _route("r", [
            {"matches": [{"path": {"type": "RegularExpression", "value": "/(a+)+"}}],
             "backendRefs": [_backend("re")]},
            {"backendRefs": [_backend("root")]},
        ]),
    ]  # fmt: skip
    ferryman.start()
    _push(ferryman, _records(routes, named))
    eventually(lambda: ferryman.get(HOST, "/aaa").served_by == "re", 60, "the record live")
    assert ferryman.get(HOST, "/aaa!").served_by == "root"
    seen = named["re"].hits + named["root"].hits
    assert ferryman.get(HOST, "/" + "a" * 30 + "!").status == 500
    assert named["re"].hits + named["root"].hits == seen
