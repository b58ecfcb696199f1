"""HTTPRoute backends whose Service port's appProtocol is kubernetes.io/h2c
(GEP-1911, the conformance suite's HTTPRouteBackendProtocolH2C), in manifests
mode through real NGINX and a real HTTP/2 backend without TLS: whatever the
client speaks (HTTP/1.1, or h2c with prior knowledge as the suite does), the
request reaches the backend over HTTP/2 with its method, path, Host, headers
and body (``@ferryman_h2c``: grpc_pass, as NGINX's proxy module speaks
HTTP/1.x only); NGINX's own errors stay HTTP's (502, not a gRPC status);
weighted backends of both protocols keep their shares; and the Service's
appProtocol changing is a push, never a reload. On Debian's NGINX 1.22,
NGINX 1.30.4 and Angie 1.12.1.

The backend (testkit/h2c_echo.py) is written with ``h2`` (hyper-h2), which the
lock file has through lightkube's httpx2[http2] and the dev group names,
since these tests import it; the h2c client is httpx with ``http2`` (the same
library underneath). Like the suite's echo-basic, the backend answers 400 to
HTTP/1.1, so a request proxied the old way shows.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from testkit.gateway_docs import gateway, gateway_class, route, served, to
from testkit.h2c_echo import H2cEcho
from testkit.harness import Backends, Ferryman, eventually, free_port, service_with_backends

POOL = ("127.0.0.32", "127.0.0.33")
H2C = "kubernetes.io/h2c"
HOST = "h2c.example.com"


def h2c_service(
    name: str, backend: H2cEcho | None, app_protocol: str | None
) -> list[dict[str, Any]]:
    """A Service (port 80, ``app_protocol``) with ``backend`` as its endpoint
    (None: a port nothing listens on)."""
    target = backend or _Closed()
    docs = service_with_backends(name, [target])  # type: ignore[list-item]
    if app_protocol:
        docs[0]["spec"]["ports"][0]["appProtocol"] = app_protocol
    return docs


class _Closed:
    """An endpoint whose port refuses connections."""

    name = "closed"
    address = "127.0.0.1"

    def __init__(self) -> None:
        self.port = free_port()


def request(port: int, path: str = "/", *, h2: bool = False, **kw: Any) -> httpx.Response:
    """A request to the Gateway's address over HTTP/1.1, or h2c with prior knowledge."""
    kw.setdefault("method", "GET")
    headers = {"Host": HOST, **kw.pop("headers", {})}
    with httpx.Client(http1=not h2, http2=h2, timeout=10) as c:
        return c.request(url=f"http://{POOL[0]}:{port}{path}", headers=headers, **kw)


@pytest.fixture
def echoes() -> Iterator[dict[str, H2cEcho]]:
    started = {name: H2cEcho(name) for name in ("h2", "h2b")}
    yield started
    for e in started.values():
        e.close()


@pytest.fixture
def gw(ferryman: Ferryman, echoes: dict[str, H2cEcho], backends: Backends) -> Ferryman:
    ferryman.write("svc-h2", h2c_service("h2", echoes["h2"], H2C))
    ferryman.write("svc-tea", service_with_backends("tea", [backends.start("tea")]))
    ferryman.write("class", gateway_class())
    ferryman.extra_args += ["--enable-gateway-api", "--gateway-addresses", f"{POOL[0]}-{POOL[-1]}"]
    return ferryman


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_an_h2c_backend_gets_http_2_whatever_the_client_speaks(
    gw: Ferryman, echoes: dict[str, H2cEcho]
) -> None:
    """HTTP/1.1 and h2c clients; method, path and query, Host, headers (the
    rule's RequestHeaderModifier once, though the request went on in another
    location) and a body reach the backend over HTTP/2; the answer's headers
    and the rule's ResponseHeaderModifier come back; a route change and the
    Service losing and regaining its appProtocol are pushes, no reload."""
    port = free_port()
    gw.write("gateways", gateway("one", [{"name": "http", "port": port, "protocol": "HTTP"}]))
    rule = to("h2")
    rule["filters"] = [
        {"type": "RequestHeaderModifier", "requestHeaderModifier": {
            "add": [{"name": "x-added", "value": "rule"}]}},
        {"type": "ResponseHeaderModifier", "responseHeaderModifier": {
            "set": [{"name": "x-route", "value": "h2c"}]}},
    ]  # fmt: skip
    gw.write("routes", route("h2c", "one", [HOST], [rule]))
    gw.start()
    # Proxy-Connection, as older HTTP/1.1 clients send it: malformed in HTTP/2.
    r = request(port, "/some/path?q=1", headers={"Proxy-Connection": "keep-alive"})
    assert r.status_code == 200, r.text
    answer = r.json()
    assert (answer["name"], answer["protocol"], answer["method"]) == ("h2", "HTTP/2.0", "GET")
    assert answer["path"] == "/some/path?q=1"
    assert answer["authority"] == HOST
    assert answer["headers"]["x-added"] == ["rule"]
    assert r.headers["x-backend"] == "h2" and r.headers["x-route"] == "h2c"
    posted = request(port, "/upload", method="POST", content=b"x" * 100_000)
    assert posted.status_code == 200 and posted.json()["body"] == "x" * 100_000
    assert posted.json()["method"] == "POST"
    h2 = request(port, "/", h2=True)
    assert (h2.status_code, h2.http_version, h2.json()["name"]) == (200, "HTTP/2", "h2")
    assert echoes["h2"].refused == 0
    reloads = gw.reloads()
    # Without the appProtocol the backend is spoken to in HTTP/1.1, which it refuses.
    gw.write("svc-h2", h2c_service("h2", echoes["h2"], None))
    eventually(lambda: request(port).status_code == 400, what="HTTP/1.1 again")
    gw.write("svc-h2", h2c_service("h2", echoes["h2"], H2C))
    eventually(lambda: request(port).status_code == 200, what="h2c again")
    gw.write("routes", route("h2c", "one", [HOST], [to("tea")]))
    eventually(lambda: served(POOL[0], port, HOST) == "tea", what="route change")
    assert gw.reloads() == reloads


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_weighted_backends_of_both_protocols_keep_their_shares(
    gw: Ferryman, echoes: dict[str, H2cEcho]
) -> None:
    """One rule, an HTTP/1.1 backend and two h2c ones (weights 2:1:1): each
    request reaches its backend in its protocol (no 400), in proportion."""
    port = free_port()
    gw.write("svc-h2b", h2c_service("h2b", echoes["h2b"], H2C))
    gw.write("gateways", gateway("one", [{"name": "http", "port": port, "protocol": "HTTP"}]))
    rule = {"backendRefs": [{"name": "tea", "port": 80, "weight": 2},
                            {"name": "h2", "port": 80, "weight": 1},
                            {"name": "h2b", "port": 80, "weight": 1}]}  # fmt: skip
    gw.write("routes", route("mixed", "one", [HOST], [rule]))
    gw.start()
    names = []
    for _ in range(200):
        r = request(port)
        assert r.status_code == 200, r.text
        names.append(r.json()["name"])
    counts = {n: names.count(n) for n in ("tea", "h2", "h2b")}
    # 100, 50 and 50 expected of 200: far outside chance beyond these bounds.
    assert 70 < counts["tea"] < 130 and 25 < counts["h2"] < 80 and 25 < counts["h2b"] < 80, counts
    assert echoes["h2"].refused == echoes["h2b"].refused == 0


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_an_unreachable_h2c_backend_is_an_http_502(gw: Ferryman) -> None:
    """NGINX's own error is HTTP's (the gRPC location maps it to a gRPC
    status; this one does not)."""
    port = free_port()
    gw.write("svc-down", h2c_service("down", None, H2C))
    gw.write("gateways", gateway("one", [{"name": "http", "port": port, "protocol": "HTTP"}]))
    gw.write("routes", route("down", "one", [HOST], [to("down")]))
    gw.start()
    r = request(port)
    assert r.status_code == 502
    assert "grpc-status" not in r.headers


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_a_mirrored_request_to_an_h2c_backend_is_copied(
    gw: Ferryman, echoes: dict[str, H2cEcho], backends: Backends
) -> None:
    """RequestMirror on a rule whose backend speaks h2c: the request goes on
    in @ferryman_h2c_mirror_1, which sends the copy (HTTP/1.1, to the
    mirror's backend) as @ferryman_mirror_1 does."""
    port = free_port()
    copy = backends.start("copy")
    gw.write("svc-copy", service_with_backends("copy", [copy]))
    gw.write("gateways", gateway("one", [{"name": "http", "port": port, "protocol": "HTTP"}]))
    rule = to("h2")
    rule["filters"] = [{"type": "RequestMirror",
                        "requestMirror": {"backendRef": {"name": "copy", "port": 80}}}]  # fmt: skip
    gw.write("routes", route("mirrored", "one", [HOST], [rule]))
    gw.start()
    for i in range(3):
        r = request(port, f"/m{i}")
        assert (r.status_code, r.json()["name"]) == (200, "h2"), r.text
    eventually(lambda: copy.hits == 3, what="three copies")
    assert echoes["h2"].hits == 3
