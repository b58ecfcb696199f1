"""NIC's ``nginx.org/*`` annotations on Ingress through real NGINX and real
backends (kinds/ingress/records/options.py, ingress_vs.py): what the client and the
backend see, NIC's rejections, Warnings for unknown annotations, and no reload
for any of them."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from testkit import ingress_router as router
from testkit import router_kit as kit
from testkit.annotated_ingress import HOST, annotated, last, start
from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    fast_path_counts,
    ingress,
    path,
    rule,
    served_by,
    service_with_backends,
    tls_secret,
)
from testkit.nic_policy_examples import _basic, _secret
from testkit.upstream_fields import _TLSEcho


def test_read_timeout_answers_504_and_edits_do_not_reload(
    either_fast_path: Ferryman, backends: Backends
) -> None:
    f = either_fast_path
    start(f, backends, annotated({"nginx.org/proxy-read-timeout": "1s"}))
    module = "--nginx-modules-dir" not in f.extra_args
    before = fast_path_counts(f) if module else (0.0, 0.0)
    assert f.get(HOST, "/?delay=0.1").served_by == "a"
    assert f.get(HOST, "/?delay=2").status == 504
    if module:
        # Timeouts only: the module serves the route itself (the F record).
        after = fast_path_counts(f)
        assert (after[0] - before[0], after[1] - before[1]) == (2, 0)
    assert last(f)["reason"] == "AddedOrUpdated"
    f.write("doc0", annotated({"nginx.org/proxy-read-timeout": "5s"}))
    eventually(lambda: f.get(HOST, "/?delay=2").served_by == "a", 60, "longer timeout")
    f.write("doc0", annotated({}))
    eventually(lambda: f.get(HOST, "/?delay=2").served_by == "a", 60, "fast path again")
    assert f.reloads() == 1  # the start-up reload only


def test_client_max_body_size_answers_413(ferryman: Ferryman, backends: Backends) -> None:
    start(ferryman, backends, annotated({"nginx.org/client-max-body-size": "1k"}))
    assert ferryman.get(HOST, "/", method="POST", content=b"x" * 1024).status == 200
    assert ferryman.get(HOST, "/", method="POST", content=b"x" * 1025).status == 413


def test_hide_and_pass_headers(ferryman: Ferryman, backends: Backends) -> None:
    """NGINX hides the upstream's Server (ferryman sends none, server_tokens off);
    proxy-pass-headers puts it back; proxy-hide-headers drops Content-Type."""
    start(
        ferryman,
        backends,
        annotated(
            {
                "nginx.org/proxy-pass-headers": "Server",
                "nginx.org/proxy-hide-headers": "Content-Type",
            }
        ),
    )
    r = ferryman.get(HOST, "/")
    assert r.status == 200 and r.headers["server"].startswith("BaseHTTP")
    assert "content-type" not in r.headers


def test_rewrites_as_nic(ferryman: Ferryman, backends: Backends) -> None:
    ing = annotated(
        {"nginx.org/rewrites": "serviceName=app rewrite=/beans;serviceName=tea rewrite=/"},
        path("/coffee", "app"),
        path("/tea/", "tea"),
    )
    ferryman.write("tea", service_with_backends("tea", [backends.start("t")]))
    start(ferryman, backends, ing)
    assert ferryman.get(HOST, "/coffee/x?y=1").json()["path"] == "/beans/x?y=1"
    assert ferryman.get(HOST, "/coffee").json()["path"] == "/beans"
    assert ferryman.get(HOST, "/tea/green").json()["path"] == "/green"
    assert ferryman.get(HOST, "/coffeecake").status == 404  # element-wise, as Kubernetes says


def test_redirect_to_https_by_x_forwarded_proto(ferryman: Ferryman, backends: Backends) -> None:
    start(ferryman, backends, annotated({"nginx.org/redirect-to-https": "true"}))
    r = ferryman.get(HOST, "/p?q=1", headers={"X-Forwarded-Proto": "http"})
    assert r.status == 301 and r.headers["location"] == f"https://{HOST}/p?q=1"
    assert ferryman.get(HOST, "/p", headers={"X-Forwarded-Proto": "https"}).served_by == "a"
    assert ferryman.get(HOST, "/p").served_by == "a"  # NIC's: no header, no redirect


def test_hsts_over_https_only(ferryman: Ferryman, backends: Backends) -> None:
    ferryman.write("tls", tls_secret("cert", [HOST]))
    ing = annotated(
        {"nginx.org/hsts": "true", "nginx.org/hsts-include-subdomains": "true"},
        tls=[{"hosts": [HOST], "secretName": "cert"}],
    )
    start(ferryman, backends, ing)
    r = ferryman.get(HOST, "/", https=True)
    assert r.headers["strict-transport-security"] == "max-age=2592000; includeSubDomains; preload"
    assert ferryman.get(HOST, "/nowhere", https=True).headers["strict-transport-security"]
    plain = ferryman.get(HOST, "/")
    assert plain.status == 301 and "strict-transport-security" not in plain.headers
    behind = annotated(
        {
            "nginx.org/hsts": "true",
            "nginx.org/hsts-behind-proxy": "true",
            "nginx.org/hsts-max-age": "60",
        }
    )
    ferryman.write("doc0", behind)
    eventually(lambda: ferryman.get(HOST, "/").status == 200, 60, "no TLS")
    r = ferryman.get(HOST, "/", headers={"X-Forwarded-Proto": "https"})
    assert r.headers["strict-transport-security"] == "max-age=60; preload"
    assert "strict-transport-security" not in ferryman.get(HOST, "/").headers


def test_lb_method_ip_hash_and_round_robin(ferryman: Ferryman, backends: Backends) -> None:
    start(ferryman, backends, annotated({"nginx.org/lb-method": "ip_hash"}), names=("a", "b", "c"))
    assert len({served_by(ferryman, HOST, "/") for _ in range(12)}) == 1
    ferryman.write(
        "doc0", annotated({"nginx.org/lb-method": "round_robin", "nginx.org/keepalive": "0"})
    )
    eventually(lambda: len({served_by(ferryman, HOST, "/") for _ in range(12)}) == 3, 60, "spread")
    # keepalive 0: NIC's Connection: close to the backend.
    assert ferryman.get(HOST, "/").json()["headers"]["connection"] == "close"
    assert last(ferryman)["reason"] == "AddedOrUpdated"
    assert ferryman.reloads() == 1


def test_basic_auth(ferryman: Ferryman, backends: Backends) -> None:
    hashed = subprocess.run(
        ["openssl", "passwd", "-apr1", "bar"], capture_output=True, text=True, check=True
    ).stdout.strip()
    secret = _secret("passwd", "nginx.org/htpasswd", {"htpasswd": f"foo:{hashed}\n".encode()})
    ing = annotated(
        {"nginx.org/basic-auth-secret": "passwd", "nginx.org/basic-auth-realm": "Cafe App"}
    )
    start(ferryman, backends, secret, ing)
    r = ferryman.get(HOST, "/")
    assert r.status == 401 and r.headers["www-authenticate"] == 'Basic realm="Cafe App"'
    assert ferryman.get(HOST, "/", headers=_basic("foo", "bar")).served_by == "a"
    assert ferryman.get(HOST, "/", headers=_basic("foo", "baz")).status == 401
    # The Secret gone: every request answers 500, the Ingress says why.
    ferryman.remove("doc0")
    eventually(lambda: ferryman.get(HOST, "/", headers=_basic("foo", "bar")).status == 500, 60)
    # The Event follows the push that already answers 500.
    assert "default/passwd" in ferryman.last_event("ann", "AddedOrUpdatedWithWarning")["message"]


def test_ssl_services_proxy_over_tls(ferryman: Ferryman) -> None:
    backend = _TLSEcho("secure")
    try:
        ferryman.write("svc", service_with_backends("app", [backend]))
        ferryman.write("ing", annotated({"nginx.org/ssl-services": "app"}))
        ferryman.start()
        assert served_by(ferryman, HOST, "/") == "secure"
    finally:
        backend.close()


def test_server_tokens_and_connect_timeout(ferryman: Ferryman, backends: Backends) -> None:
    start(
        ferryman,
        backends,
        annotated({"nginx.org/server-tokens": "true", "nginx.org/proxy-connect-timeout": "2s"}),
    )
    assert ferryman.get(HOST, "/").headers["server"].startswith("nginx/1.")


def test_invalid_values_reject_with_nics_messages(ferryman: Ferryman, backends: Backends) -> None:
    start(
        ferryman,
        backends,
        annotated(
            {
                "nginx.org/proxy-read-timeout": "abc",
                "nginx.org/lb-method": "fastest",
                "nginx.org/hsts-max-age": "10",
                "nginx.org/rewrites": "serviceName=nope rewrite=/",
            }
        ),
    )
    event = last(ferryman)
    assert event["reason"] == "Rejected"
    for message in (
        'annotations.nginx.org/proxy-read-timeout: Invalid value: "abc": must be a time',
        'annotations.nginx.org/lb-method: Invalid value: "fastest": '
        'invalid load balancing method: "fastest"',
        "annotations.nginx.org/hsts-max-age: Forbidden: related annotation nginx.org/hsts: "
        "must be set",
        'annotations.nginx.org/rewrites: Invalid value: "serviceName=nope rewrite=/": '
        "The following services were not found: nope",
    ):
        assert message in event["message"]
    assert ferryman.get(HOST, "/").status == 404


def test_unknown_and_snippet_annotations_warn(ferryman: Ferryman, backends: Backends) -> None:
    start(
        ferryman,
        backends,
        annotated(
            {
                "nginx.org/proxy-reed-timeout": "1s",
                "nginx.org/server-snippets": "return 403;",
                "nginx.org/proxy-max-temp-file-size": "0",
            }
        ),
    )
    assert served_by(ferryman, HOST, "/") == "a"
    event = last(ferryman)
    assert event["reason"] == "AddedOrUpdatedWithWarning"
    assert "nginx.org/proxy-reed-timeout is not a NIC annotation" in event["message"]
    assert "snippets are not supported" in event["message"]
    assert "proxy_max_temp_file_size takes no variable" in event["message"]


def test_websocket_upgrade(ferryman: Ferryman, backends: Backends) -> None:
    """The backend sees the client's Upgrade (NIC's websocket-services)."""
    start(ferryman, backends, annotated({"nginx.org/websocket-services": "app"}))
    r = ferryman.get(HOST, "/ws", headers={"Upgrade": "websocket", "Connection": "Upgrade"})
    h = r.json()["headers"]
    assert (h["upgrade"], h["connection"]) == ("websocket", "upgrade")


def test_path_regex(ferryman: Ferryman, backends: Backends) -> None:
    """NIC's ~ "^path" (case_sensitive), ~* (case_insensitive) and = (exact)."""
    ferryman.write("tea", service_with_backends("tea", [backends.start("t")]))
    start(
        ferryman,
        backends,
        annotated({"nginx.org/path-regex": "case_sensitive"}, path("/tea/[A-Z0-9]+", "tea")),
    )
    assert served_by(ferryman, HOST, "/tea/ABC1") == "t"
    assert ferryman.get(HOST, "/tea/abc").status == 404
    ferryman.write(
        "doc0",
        annotated({"nginx.org/path-regex": "case_insensitive"}, path("/tea/[A-Z0-9]+$", "tea")),
    )
    eventually(lambda: served_by(ferryman, HOST, "/tea/abc") == "t", 60, "caseless")
    ferryman.write(
        "doc0",
        annotated({"nginx.org/path-regex": "exact"}, path("/tea", "tea"), path("/", "app")),
    )
    # Every path exact, "/" too: /tea/x is no path's.
    eventually(lambda: ferryman.get(HOST, "/tea/x").status == 404, 60, "exact")
    assert served_by(ferryman, HOST, "/tea") == "t"
    assert served_by(ferryman, HOST, "/") == "a"
    ferryman.write(
        "doc0", annotated({"nginx.org/path-regex": "case_sensitive"}, path("/tea/(x", "tea"))
    )
    eventually(lambda: last(ferryman)["reason"] == "Rejected", 60, "rejected")
    assert "must be a valid regular expression" in last(ferryman)["message"]
    assert ferryman.reloads() == 1


_BIG = 32 * 1024 * 1024  # past any socket buffers between NGINX and the backend


class _Big(BaseHTTPRequestHandler):
    """A large body; ``done`` is set once the backend has written it all."""

    protocol_version = "HTTP/1.1"
    done = threading.Event()

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(_BIG))
        self.end_headers()
        block = b"x" * 65536
        for _ in range(_BIG // len(block)):
            self.wfile.write(block)
        _Big.done.set()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _backend_finished_while_client_waits(f: Ferryman) -> bool:
    """Read the headers only, then wait: has the backend written everything
    meanwhile (NGINX buffered it) or is it held by the client?"""
    _Big.done.clear()
    with httpx.stream(
        "GET", f"http://127.0.0.1:{f.http_port}/", headers={"Host": HOST}, timeout=10
    ) as r:
        assert r.status_code == 200
        finished = _Big.done.wait(3)
    _Big.done.wait(10)  # the rest drained before the next request
    return finished


def test_proxy_buffering_off(ferryman: Ferryman) -> None:
    """NIC's proxy-buffering: buffered, NGINX takes the whole response from the
    backend however slowly the client reads; "false" (the slow path's location
    with proxy_buffering off) passes it on only as fast as the client reads."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Big)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        big = _TLSEcho.__new__(_TLSEcho)  # only .name and .port are read
        big.name, big.port = "big", int(server.server_address[1])
        ferryman.write("svc", service_with_backends("app", [big]))
        ferryman.write("ing", annotated({"nginx.org/proxy-read-timeout": "10s"}))
        ferryman.start()
        assert _backend_finished_while_client_waits(ferryman)
        off = {"nginx.org/proxy-read-timeout": "10s", "nginx.org/proxy-buffering": "false"}
        ferryman.write("ing", annotated(off))
        eventually(lambda: not _backend_finished_while_client_waits(ferryman), 60, "unbuffered")
        assert ferryman.reloads() == 1
    finally:
        server.shutdown()


@pytest.fixture
def annotated_router(
    either_fast_path: Ferryman, backends: Backends
) -> Iterator[tuple[Ferryman, kit.HostClient]]:
    yield from router.serve_router(either_fast_path, backends, with_timeout)


def with_timeout(obj: dict[str, Any]) -> dict[str, Any]:
    """An annotation that puts the host on the VirtualServer engine (ingress_vs)."""
    obj["metadata"]["annotations"] = {"nginx.org/proxy-read-timeout": "30s"}
    return obj


@kit.examples(10)
@router.drawn
def test_the_vs_engine_routes_an_annotated_host_like_match(
    annotated_router: tuple[Ferryman, kit.HostClient],
    rules: list[tuple[str, str, str]],
    default: str | None,
    requests: list[str],
) -> None:
    """Kubernetes path semantics written as NGINX locations (= /p and /p/ for a
    Prefix /p, kinds/ingress/records/as_virtualserver.py) route as ``routes.match`` does."""
    router.check_example(*annotated_router, rules, default, requests, with_timeout)


def test_policies_with_annotations(ferryman: Ferryman, backends: Backends) -> None:
    """nginx.org/policies on a host the annotations put on the VirtualServer
    engine: the Policy is enforced there too (403), edits without reload."""
    from testkit.vs_policies import policy

    ing = annotated({"nginx.org/policies": "local", "nginx.org/proxy-read-timeout": "1s"})
    start(ferryman, backends, policy("local", accessControl={"deny": ["127.0.0.0/8"]}), ing)
    assert ferryman.get(HOST, "/").status == 403
    assert ferryman.get(HOST, "/nowhere").status == 403
    ferryman.write("doc0", policy("local", accessControl={"allow": ["127.0.0.1"]}))
    eventually(lambda: served_by(ferryman, HOST, "/") == "a", 60, "allowed")
    assert ferryman.get(HOST, "/?delay=2").status == 504
    assert ferryman.reloads() == 1


def test_proxy_set_headers_and_add_header(ferryman: Ferryman, backends: Backends) -> None:
    start(
        ferryman,
        backends,
        annotated(
            {
                "nginx.org/proxy-set-headers": "X-Tenant: blue, X-Forwarded-Host",
                "nginx.org/add-header": "X-Frame-Options: DENY, X-Served: yes: always",
            }
        ),
    )
    r = ferryman.get(HOST, "/", headers={"X-Forwarded-Host": "outside.test"})
    seen = r.json()["headers"]
    assert seen["x-tenant"] == "blue"
    assert seen["x-forwarded-host"] == "outside.test"  # the client's own, as NIC's $http_
    assert (r.headers["x-frame-options"], r.headers["x-served"]) == ("DENY", "yes")
    ferryman.write("doc0", annotated({"nginx.org/add-header": "X-Bad: $host"}))
    eventually(lambda: last(ferryman)["reason"] == "Rejected", 60, "rejected")
    assert "invalid character in header value: $" in last(ferryman)["message"]


def test_configmap_keys_are_the_defaults(ferryman: Ferryman, backends: Backends) -> None:
    """annotation > ConfigMap key > built-in default, a ConfigMap change
    re-translating every Ingress."""
    from testkit.configmap_docs import NAME, NS, configmap

    ferryman.extra_args += ["--nginx-configmaps", f"{NS}/{NAME}"]
    ferryman.write("cm", configmap(proxy_read_timeout="1s", hsts="true"))
    ferryman.write("other", ingress("other", [rule("other.test", path("/", "app"))]))
    start(ferryman, backends, annotated({"nginx.org/proxy-read-timeout": "5s"}))
    assert ferryman.get("other.test", "/?delay=2").status == 504  # the ConfigMap's 1s
    assert ferryman.get(HOST, "/?delay=2").served_by == "a"  # the annotation's 5s
    # (The ConfigMap's own update reloads once, as its reader does for any change.)
    ferryman.write("cm", configmap(proxy_read_timeout="10s", hsts="true"))
    eventually(lambda: served_by(ferryman, "other.test", "/?delay=2") == "a", 60, "10s")
    assert ferryman.get(HOST, "/?delay=6").status == 504  # still the annotation's 5s
