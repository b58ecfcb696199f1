"""VirtualServers (k8s.nginx.org/v1) served by the Lua router through real NGINX,
with real backends: path forms and NGINX's location precedence, splits, matches,
redirects and returns, host ownership shared with Ingress, rejections, and no
reload for any VirtualServer change."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from testkit.harness import (
    Backends,
    BrokenBackend,
    Ferryman,
    eventually,
    ingress,
    path,
    rule,
    served_by,
    service_with_backends,
    tls_secret,
)
from testkit.virtualservers import start_with_backends, to, vs


def test_path_forms_follow_nginx_location_precedence(
    either_fast_path: Ferryman, backends: Backends
) -> None:
    f = either_fast_path
    routes = [
        {"path": "/", "action": to("a")},
        {"path": "=/exact", "action": to("b")},
        {"path": "/images", "action": to("a")},
        {"path": "~ \\.png$", "action": to("b")},
        {"path": "^~ /static", "action": to("c")},
        {"path": "~* /CASE", "action": to("c")},
        {"path": "/tea/", "action": to("b")},
    ]
    start_with_backends(f, backends, vs("cafe", "cafe.test", routes))
    expected = {
        "/": "a",
        "/exact": "b",  # = wins over everything
        "/exact/more": "a",  # = is exact only: the longest prefix "/"
        "/images/x": "a",
        "/images/x.png": "b",  # a regex beats a plain prefix
        "/static/x.png": "c",  # ^~ stops the regexes
        "/any/case/x": "c",  # ~* is case-insensitive
        "/any/CASE.png": "b",  # regexes in the routes' order
        "/tea/x": "b",
        "/teapot": "a",  # NGINX's prefixes are strings, not path elements
    }
    for p, want in expected.items():
        assert served_by(f, "cafe.test", p) == want, p
    # A proxying prefix ending in "/": NGINX answers 301 for the name without it.
    r = f.get("cafe.test", "/tea?x=1")
    assert r.status == 301
    assert r.headers["location"].endswith("/tea/?x=1")
    assert f.reloads() == 1


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_splits_matches_redirect_and_return(ferryman: Ferryman, backends: Backends) -> None:
    routes = [
        {
            "path": "/split",
            "splits": [{"weight": 80, "action": to("a")}, {"weight": 20, "action": to("b")}],
        },
        {
            "path": "/match",
            "matches": [
                {"conditions": [{"header": "X-Version", "value": "v2"}], "action": to("b")},
                {
                    "conditions": [
                        {"cookie": "user", "value": "!admin"},
                        {"argument": "beta", "value": "~^y"},
                    ],
                    "action": to("c"),
                },
            ],
            "action": to("a"),
        },
        {"path": "/old", "action": {"redirect": {"url": "https://${host}/new", "code": 307}}},
        {
            "path": "/teapot",
            "action": {
                "return": {
                    "code": 418,
                    "type": "text/plain",
                    "body": 'I am a \\"teapot\\" at ${request_uri}',
                    "headers": [{"name": "X-Kind", "value": "tea"}],
                }
            },
        },
    ]
    start_with_backends(ferryman, backends, vs("cafe", "cafe.test", routes))
    counts = {"a": 0, "b": 0}
    n = 400
    for _ in range(n):
        counts[str(served_by(ferryman, "cafe.test", "/split"))] += 1
    # Binomial(400, 0.2): sd 8; 5 sd either side.
    assert 40 <= counts["b"] <= 120, counts
    get = ferryman.get
    assert get("cafe.test", "/match", headers={"X-Version": "V2"}).served_by == "b"  # caseless
    assert get("cafe.test", "/match?beta=yes").served_by == "c"  # cookie absent: != admin
    assert get("cafe.test", "/match?beta=yes", headers={"Cookie": "user=admin"}).served_by == "a"
    assert get("cafe.test", "/match?beta=no").served_by == "a"  # the default action
    r = get("cafe.test", "/old")
    assert (r.status, r.headers["location"]) == (307, "https://cafe.test/new")
    r = get("cafe.test", "/teapot?x")
    assert (r.status, r.text, r.headers["x-kind"]) == (418, 'I am a "teapot" at /teapot?x', "tea")
    assert r.headers["content-type"].startswith("text/plain")


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_virtual_server_changes_never_reload(ferryman: Ferryman, backends: Backends) -> None:
    start_with_backends(ferryman, backends)
    ferryman.write("vs", vs("cafe", "cafe.test", [{"path": "/", "action": to("a")}]))
    eventually(lambda: served_by(ferryman, "cafe.test", "/") == "a", 60, "created")
    gauge = "nginx_ingress_controller_virtualserver_resources_total"
    # The gauges are set after the push that serves (engine/controller.py's flush).
    eventually(lambda: ferryman.metrics()[gauge] == 1, 60, "the VirtualServer counted")
    ferryman.write("vs", vs("cafe", "cafe.test", [{"path": "/", "action": to("b")}]))
    eventually(lambda: served_by(ferryman, "cafe.test", "/") == "b", 60, "updated")
    ferryman.remove("vs")
    eventually(lambda: served_by(ferryman, "cafe.test", "/") == "404", 60, "deleted")
    eventually(lambda: ferryman.metrics()[gauge] == 0, 60, "the VirtualServer uncounted")
    assert ferryman.reloads() == 1  # the start-up reload only
    events = [e["reason"] for e in ferryman.events_for("cafe")]
    assert events.count("AddedOrUpdated") == 2


@pytest.mark.parametrize("older", ["Ingress", "VirtualServer"])
def test_ingress_and_virtual_server_share_hosts_oldest_wins(
    ferryman: Ferryman, backends: Backends, older: str
) -> None:
    early, late = "2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z"
    ing = ingress("shop", [rule("shop.test", path("/", "a"))])
    ing["metadata"]["creationTimestamp"] = early if older == "Ingress" else late
    virtual = vs("shop", "shop.test", [{"path": "/", "action": to("b")}])
    virtual["metadata"]["creationTimestamp"] = early if older == "VirtualServer" else late
    start_with_backends(ferryman, backends, ing, virtual)
    winner, loser = ("a", "b") if older == "Ingress" else ("b", "a")
    assert served_by(ferryman, "shop.test", "/") == winner
    if older == "Ingress":
        event = ferryman.events_for("shop")
        lost = [e for e in event if e["kind"] == "VirtualServer"]
        assert lost[-1]["reason"] == "Rejected"
        assert lost[-1]["message"] == "Host is taken by another resource"
    else:
        lost = [e for e in ferryman.events_for("shop") if e["kind"] == "Ingress"]
        assert lost[-1]["reason"] == "Rejected"
        assert "shop.test is taken by default/shop" in lost[-1]["message"]
    # The winner leaves: the other takes the host, with no reload.
    ferryman.remove("doc0" if older == "Ingress" else "doc1")
    eventually(lambda: served_by(ferryman, "shop.test", "/") == loser, 60, "the host handed over")
    assert ferryman.reloads() == 1


def test_invalid_virtual_server_is_rejected_and_others_keep_serving(
    ferryman: Ferryman, backends: Backends
) -> None:
    good = vs("good", "good.test", [{"path": "/", "action": to("a")}])
    start_with_backends(ferryman, backends, good)
    bad = vs("bad", "bad.test", [{"path": "/", "action": to("missing")}])
    ferryman.write("bad", bad)
    event = eventually(lambda: ferryman.events_for("bad"), 60, "the rejection")[-1]
    assert event["reason"] == "Rejected"
    assert event["message"] == (
        "VirtualServer default/bad was rejected with error: spec.routes[0].action.pass: "
        'Not found: "missing"'
    )
    assert served_by(ferryman, "bad.test", "/") == "404"
    assert served_by(ferryman, "good.test", "/") == "a"


def test_unimplemented_fields_make_a_warning(ferryman: Ferryman, backends: Backends) -> None:
    upstreams = [{"name": "a", "service": "a", "port": 80, "client-body-buffer-size": "16k"}]
    start_with_backends(
        ferryman, backends, vs("w", "w.test", [{"path": "/", "action": to("a")}], upstreams)
    )
    assert served_by(ferryman, "w.test", "/") == "a"
    event = ferryman.events_for("w")[-1]
    assert event["reason"] == "AddedOrUpdatedWithWarning"
    assert (
        "spec.upstreams[0].client-body-buffer-size: client_body_buffer_size takes no variable; "
        "ignored" in event["message"]
    )


def test_a_virtual_server_host_never_falls_to_ingress_routes(
    either_fast_path: Ferryman, backends: Backends
) -> None:
    f = either_fast_path
    catch_all = ingress("any", [rule(None, path("/", "a"))])
    wildcard = ingress("wild", [rule("*.wild.test", path("/", "a"))])
    virtual = vs("v", "v.wild.test", [{"path": "=/only", "action": to("b")}])
    start_with_backends(f, backends, catch_all, wildcard, virtual)
    assert served_by(f, "v.wild.test", "/only") == "b"
    # Absent from the module's zone, the host would be the wildcard's, then the catch-all's.
    assert served_by(f, "v.wild.test", "/other") == "404"
    assert served_by(f, "x.wild.test", "/other") == "a"
    assert served_by(f, "elsewhere.test", "/other") == "a"


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_tls_secret_and_redirect(ferryman: Ferryman, backends: Backends) -> None:
    virtual = vs(
        "secure",
        "secure.test",
        [{"path": "/", "action": to("a")}],
        tls={"secret": "secure-tls", "redirect": {"enable": True, "code": 308}},
    )
    proxied = vs(
        "behind",
        "behind.test",
        [{"path": "/", "action": to("a")}],
        tls={
            "secret": "secure-tls",
            "redirect": {"enable": True, "basedOn": "x-forwarded-proto"},
        },
    )
    secret = tls_secret("secure-tls", ["secure.test", "behind.test"])
    start_with_backends(ferryman, backends, secret, virtual, proxied)
    r = ferryman.get("secure.test", "/x?y=1")
    assert (r.status, r.headers["location"]) == (308, "https://secure.test/x?y=1")
    assert ferryman.get("secure.test", "/x", https=True).served_by == "a"
    # Behind a proxy that terminated TLS: X-Forwarded-Proto decides (NIC's default code).
    assert ferryman.get("behind.test", "/", headers={"X-Forwarded-Proto": "https"}).served_by == "a"
    r = ferryman.get("behind.test", "/", headers={"X-Forwarded-Proto": "http"})
    assert (r.status, r.headers["location"]) == (301, "https://behind.test/")


def test_upstream_tries_and_timeouts_per_request(ferryman: Ferryman, backends: Backends) -> None:
    broken = [BrokenBackend(), BrokenBackend()]
    for i, b in enumerate(broken):
        b.name = f"broken{i}"
    good = backends.start("good")
    ferryman.write("svc-flaky", service_with_backends("flaky", [good, *broken]))
    ferryman.write("svc-a", service_with_backends("a", [backends.start("a")]))
    upstreams = [
        # No passive health: every request starts at the round-robin's peer.
        {"name": "once", "service": "flaky", "port": 80, "next-upstream-tries": 1, "max-fails": 0},
        {"name": "retried", "service": "flaky", "port": 80, "max-fails": 0},
        {"name": "slow", "service": "a", "port": 80, "read-timeout": "500ms"},
    ]
    routes = [
        {"path": "/once", "action": to("once")},
        {"path": "/retried", "action": to("retried")},
        {"path": "/slow", "action": to("slow")},
    ]
    ferryman.write("vs", vs("flaky", "flaky.test", routes, upstreams))
    ferryman.start()
    try:
        once = [ferryman.get("flaky.test", "/once").status for _ in range(30)]
        assert once.count(502) >= 15, once  # two peers of three fail, and no retry
        retried = [ferryman.get("flaky.test", "/retried").status for _ in range(30)]
        assert retried == [200] * 30
        started = time.monotonic()
        assert ferryman.get("flaky.test", "/slow?delay=3").status == 504
        assert time.monotonic() - started < 2.5
    finally:
        for b in broken:
            b.close()


def test_proxy_rewrite_path(ferryman: Ferryman, backends: Backends) -> None:
    def proxy(upstream: str, rewrite: str) -> dict[str, Any]:
        return {"proxy": {"upstream": upstream, "rewritePath": rewrite}}

    routes = [
        {"path": "/tea", "action": proxy("a", "/leaf")},
        {"path": "=/juice", "action": proxy("a", "/fruit")},
        {"path": "~ ^/coffee/(.*)$", "action": proxy("b", "/beans/$1")},
        {
            "path": "/mixed",
            "splits": [
                {"weight": 50, "action": proxy("a", "/m")},
                {"weight": 50, "action": proxy("b", "/m")},
            ],
        },
    ]
    start_with_backends(ferryman, backends, vs("rw", "rw.test", routes))

    def upstream_path(p: str) -> str:
        return str(ferryman.get("rw.test", p).json()["path"])

    assert upstream_path("/tea/green?x=1") == "/leaf/green?x=1"
    assert upstream_path("/juice") == "/fruit"
    assert upstream_path("/coffee/dark?y") == "/beans/dark?y"
    assert {upstream_path("/mixed/x") for _ in range(20)} == {"/m/x"}
    assert ferryman.events_for("rw")[-1]["reason"] == "AddedOrUpdated"  # no warning now


def test_least_conn_upstream_avoids_the_busy_endpoint(
    ferryman: Ferryman, backends: Backends
) -> None:
    a, b = backends.start("p"), backends.start("q")
    ferryman.write("svc", service_with_backends("app", [a, b]))
    upstreams = [{"name": "app", "service": "app", "port": 80, "lb-method": "least_conn"}]
    ferryman.write("vs", vs("lc", "lc.test", [{"path": "/", "action": to("app")}], upstreams))
    ferryman.start()
    slow: list[str | None] = []
    t = threading.Thread(target=lambda: slow.append(served_by(ferryman, "lc.test", "/s?delay=6")))
    t.start()
    while a.hits + b.hits == 0:
        threading.Event().wait(0.01)
    busy = "p" if a.hits else "q"
    quick = {served_by(ferryman, "lc.test", f"/q{i}") for i in range(6)}
    assert t.is_alive(), "the slow request ended before the quick ones: no load to avoid"
    t.join()
    assert slow == [busy]
    assert quick == {"q" if busy == "p" else "p"}


def test_proxy_sets_request_headers(ferryman: Ferryman, backends: Backends) -> None:
    action = {
        "proxy": {
            "upstream": "a",
            "requestHeaders": {
                "set": [
                    {"name": "My-Header", "value": 'say \\"${request_method}\\"'},
                    {"name": "X-Empty", "value": ""},
                    {"name": "X-Real-IP", "value": "192.0.2.1"},
                ]
            },
        }
    }
    start_with_backends(ferryman, backends, vs("h", "h.test", [{"path": "/", "action": action}]))
    headers = ferryman.get("h.test", "/", headers={"X-Empty": "client"}).json()["headers"]
    assert headers["my-header"] == 'say "GET"'
    assert "x-empty" not in headers  # an empty value drops the header, as proxy_set_header
    assert headers["x-real-ip"] == "192.0.2.1"  # ferryman's own, replaced as NIC's is
    assert ferryman.events_for("h")[-1]["reason"] == "AddedOrUpdated"


def test_random_upstreams(ferryman: Ferryman, backends: Backends) -> None:
    a, b = backends.start("p"), backends.start("q")
    ferryman.write("svc", service_with_backends("app", [a, b]))
    upstreams = [
        {"name": "one", "service": "app", "port": 80, "lb-method": "random"},
        {"name": "two", "service": "app", "port": 80, "lb-method": "random two least_conn"},
    ]
    routes = [{"path": "/one", "action": to("one")}, {"path": "/two", "action": to("two")}]
    ferryman.write("vs", vs("rnd", "rnd.test", routes, upstreams))
    ferryman.start()
    picks = [served_by(ferryman, "rnd.test", "/one") for _ in range(200)]
    # Binomial(200, 0.5): sd 7; five sd either side.
    assert 65 <= picks.count("p") <= 135, picks.count("p")
    # "random two least_conn": of the two (here: both), the less busy one.
    slow: list[str | None] = []
    t = threading.Thread(
        target=lambda: slow.append(served_by(ferryman, "rnd.test", "/two?delay=6"))
    )
    hits = a.hits + b.hits
    t.start()
    while a.hits + b.hits == hits:
        threading.Event().wait(0.01)
    quick = {served_by(ferryman, "rnd.test", f"/two/{i}") for i in range(6)}
    assert t.is_alive()
    t.join()
    assert quick == {"q" if slow == ["p"] else "p"}
    assert ferryman.events_for("rnd")[-1]["reason"] == "AddedOrUpdated"


def test_proxy_response_headers_add_and_hide(ferryman: Ferryman, backends: Backends) -> None:
    broken = BrokenBackend()
    ferryman.write("svc-broken", service_with_backends("broken", [broken]))
    response = {
        "add": [
            {"name": "X-Added", "value": "${request_method} done"},
            {"name": "X-Always", "value": "yes", "always": True},
        ],
        "hide": ["Content-Type"],
    }
    upstreams = [
        {"name": "a", "service": "a", "port": 80},
        {"name": "broken", "service": "broken", "port": 80},
    ]
    routes = [
        {"path": "/", "action": {"proxy": {"upstream": "a", "responseHeaders": response}}},
        {"path": "/down", "action": {"proxy": {"upstream": "broken", "responseHeaders": response}}},
    ]
    start_with_backends(ferryman, backends, vs("rh", "rh.test", routes, upstreams))
    try:
        r = ferryman.get("rh.test", "/")
        assert r.status == 200
        assert (r.headers["x-added"], r.headers["x-always"]) == ("GET done", "yes")
        assert "content-type" not in r.headers  # the upstream's, hidden
        r = ferryman.get("rh.test", "/down")
        assert r.status == 502
        assert r.headers.get("x-always") == "yes"  # add_header ... always
        assert "x-added" not in r.headers  # add_header: not on a 502
        assert ferryman.events_for("rh")[-1]["reason"] == "AddedOrUpdated"
    finally:
        broken.close()


def test_error_pages(ferryman: Ferryman, backends: Backends) -> None:
    broken = BrokenBackend()
    ferryman.write("svc-broken", service_with_backends("broken", [broken]))
    json_page = {
        "codes": [502, 503],
        "return": {
            "code": 200,
            "type": "application/json",
            "body": '{\\"upstream\\": \\"${upstream_status}\\"}',
            "headers": [{"name": "X-Original", "value": "${upstream_status}"}],
        },
    }
    routes = [
        {"path": "/json", "action": to("broken"), "errorPages": [json_page]},
        {
            "path": "/moved",
            "action": to("broken"),
            "errorPages": [{"codes": [502], "redirect": {"url": "${scheme}://down.test/"}}],
        },
        {
            "path": "/keep",
            "action": to("broken"),
            "errorPages": [{"codes": [502], "return": {"body": "sorry"}}],
        },
        {"path": "/fine", "action": to("a"), "errorPages": [json_page]},
    ]
    upstreams = [
        {"name": "a", "service": "a", "port": 80},
        {"name": "broken", "service": "broken", "port": 80},
    ]
    start_with_backends(ferryman, backends, vs("ep", "ep.test", routes, upstreams))
    try:
        r = ferryman.get("ep.test", "/json")
        assert (r.status, r.json(), r.headers["x-original"]) == (200, {"upstream": "502"}, "502")
        assert r.headers["content-type"] == "application/json"
        r = ferryman.get("ep.test", "/moved")
        assert (r.status, r.headers["location"]) == (301, "http://down.test/")
        r = ferryman.get("ep.test", "/keep")
        assert (r.status, r.text) == (502, "sorry")  # no code: the original status
        assert ferryman.get("ep.test", "/fine").served_by == "a"
        assert ferryman.events_for("ep")[-1]["reason"] == "AddedOrUpdated"
    finally:
        broken.close()


def test_hash_upstreams_keep_a_key_on_its_peer(ferryman: Ferryman, backends: Backends) -> None:
    peers = [backends.start(n) for n in ("p", "q", "r")]
    ferryman.write("svc", service_with_backends("app", peers))
    upstreams = [
        {"name": "h", "service": "app", "port": 80, "lb-method": "hash $arg_user"},
        {"name": "hc", "service": "app", "port": 80, "lb-method": "hash $arg_user consistent"},
        {"name": "ip", "service": "app", "port": 80, "lb-method": "ip_hash"},
    ]
    routes = [{"path": f"/{u['name']}", "action": to(str(u["name"]))} for u in upstreams]
    ferryman.write("vs", vs("hash", "hash.test", routes, upstreams))
    ferryman.start()

    def owners(route: str) -> dict[str, str | None]:
        return {
            user: served_by(ferryman, "hash.test", f"/{route}?user={user}")
            for user in (f"u{i}" for i in range(30))
        }

    for route in ("h", "hc"):
        first = owners(route)
        assert owners(route) == first  # each key stays on its peer
        assert set(first.values()) == {"p", "q", "r"}  # and the keys spread
    assert len({served_by(ferryman, "hash.test", f"/ip?n={i}") for i in range(10)}) == 1
    # Consistent: a peer leaves; only its keys move.
    before = owners("hc")
    ferryman.write("svc", service_with_backends("app", peers[:2]))
    eventually(lambda: "r" not in owners("hc").values(), 60, "r gone")
    after = owners("hc")
    assert all(after[u] == p for u, p in before.items() if p != "r")
    ferryman.last_event("hash", "AddedOrUpdated")


def test_proxy_can_drop_the_clients_request_headers(ferryman: Ferryman, backends: Backends) -> None:
    action = {
        "proxy": {
            "upstream": "a",
            "requestHeaders": {"pass": False, "set": [{"name": "X-Kept", "value": "set"}]},
        }
    }
    start_with_backends(ferryman, backends, vs("d", "d.test", [{"path": "/", "action": action}]))
    r = ferryman.get(
        "d.test", "/", method="POST", headers={"X-Client": "c", "Cookie": "a=b"}, content=b"body"
    )
    seen = r.json()
    assert seen["body"] == "body"
    assert "x-client" not in seen["headers"] and "cookie" not in seen["headers"]
    assert seen["headers"]["x-kept"] == "set"
    assert seen["headers"]["host"] == "d.test"
    assert ferryman.events_for("d")[-1]["reason"] == "AddedOrUpdated"
