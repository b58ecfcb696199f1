"""Request body limits as a route asks for them, above the server's own too:
nginx.org/client-max-body-size and a VirtualServer upstream's
client-max-body-size (NIC writes client_max_body_size into the route's
location). The router's location takes any body and checks each route's limit
itself (the fast path hands a larger or unmeasured body to the slow path), so a
route may allow more than the ConfigMap's client-max-body-size (1m here) without
a reload, and every other route keeps the server's limit."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx

from testkit.configmap_docs import NAME, NS, configmap
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
from testkit.virtualservers import vs

MIB = 1 << 20


def _ingress(name: str, host: str, size: str | None) -> dict[str, Any]:
    annotations = {"nginx.org/client-max-body-size": size} if size else {}
    return ingress(name, [rule(host, path("/", "app"))], annotations=annotations)


def _post(f: Ferryman, host: str, size: int) -> int:
    return f.get(host, "/", method="POST", content=b"x" * size).status


def _chunks(size: int) -> Iterator[bytes]:
    """``size`` bytes as a stream: httpx sends it without a Content-Length."""
    for _ in range(size // 65536):
        yield b"x" * 65536
    yield b"x" * (size % 65536)


def _chunked(f: Ferryman, host: str, size: int) -> httpx.Response:
    """A body without a Content-Length (Transfer-Encoding: chunked)."""
    with httpx.Client(timeout=20) as c:
        url = f"http://127.0.0.1:{f.http_port}/"
        return c.post(url, headers={"Host": host}, content=_chunks(size))


def test_a_route_may_allow_more_than_the_server(
    either_fast_path: Ferryman, backends: Backends
) -> None:
    f = either_fast_path
    f.write("svc", service_with_backends("app", [backends.start("a")]))
    f.write("plain", _ingress("plain", "plain.test", None))
    f.write("big", _ingress("big", "big.test", "4m"))
    f.write("open", _ingress("open", "open.test", "0"))
    f.start()
    # The server's limit for a route that sets none, on the fast path's hosts too.
    assert _post(f, "plain.test", MIB) == 200
    assert _post(f, "plain.test", MIB + 1) == 413
    # More than the server's, up to the route's own; "0" is no limit.
    r = f.get("big.test", "/", method="POST", content=b"y" * (3 * MIB))
    assert r.status == 200 and len(r.json()["body"]) == 3 * MIB
    assert _post(f, "big.test", 4 * MIB + 1) == 413
    assert _post(f, "open.test", 6 * MIB) == 200
    # Bodies without a length: the server's limit while NGINX reads them.
    r = _chunked(f, "plain.test", 100_000)
    assert r.status_code == 200 and len(r.json()["body"]) == 100_000
    assert _chunked(f, "plain.test", 2 * MIB).status_code == 413
    assert _chunked(f, "big.test", 2 * MIB).status_code == 413
    # Raising a limit is a record, not a reload.
    f.write("plain", _ingress("plain", "plain.test", "3m"))
    eventually(lambda: _post(f, "plain.test", 2 * MIB) == 200, 60, "the new limit")
    assert f.reloads() == 1


def test_a_virtualserver_upstream_may_allow_more_than_the_server(
    ferryman: Ferryman, backends: Backends
) -> None:
    f = ferryman
    f.write("svc", service_with_backends("app", [backends.start("a")]))
    upstreams = [
        {"name": "big", "service": "app", "port": 80, "client-max-body-size": "2m"},
        {"name": "plain", "service": "app", "port": 80},
    ]
    routes = [
        {"path": "/big", "action": {"pass": "big"}},
        {"path": "/", "action": {"pass": "plain"}},
    ]
    f.write("vs", vs("vs", "vs.test", routes, upstreams))
    f.start()
    post = f.get
    assert post("vs.test", "/big", method="POST", content=b"x" * (2 * MIB)).status == 200
    assert post("vs.test", "/big", method="POST", content=b"x" * (2 * MIB + 1)).status == 413
    assert post("vs.test", "/", method="POST", content=b"x" * (MIB + 1)).status == 413
    assert f.events_for("vs")[-1]["reason"] == "AddedOrUpdated"


def test_an_http2_stream_without_a_length_keeps_the_servers_limit(
    either_fast_path: Ferryman, backends: Backends
) -> None:
    """Over HTTP/2 a body may come without Content-Length (DATA frames until the
    stream ends): the fast path cannot know its size, so NGINX reads it under the
    server's limit, never under the router location's "any"."""
    f = either_fast_path
    f.extra_args += ["--nginx-configmaps", f"{NS}/{NAME}"]
    f.write("configmap", configmap(http2="true"))
    f.write("svc", service_with_backends("app", [backends.start("a")]))
    f.write("secret", tls_secret("h2-secret", ["h2.test"]))
    doc = _ingress("h2", "h2.test", None)
    doc["spec"]["tls"] = [{"hosts": ["h2.test"], "secretName": "h2-secret"}]
    f.write("h2", doc)
    f.start()

    def stream(size: int) -> httpx.Response:
        with httpx.Client(http2=True, verify=False, timeout=20) as c:
            r = c.post(
                f"https://127.0.0.1:{f.https_port}/",
                headers={"Host": "h2.test"},
                content=_chunks(size),
                extensions={"sni_hostname": "h2.test"},
            )
        assert r.http_version == "HTTP/2"
        return r

    assert stream(100_000).status_code == 200
    assert stream(2 * MIB).status_code == 413
