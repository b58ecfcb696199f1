"""egressMTLS ``sessionReuse``: NIC writes ``proxy_ssl_session_reuse``; ferryman's
balancer (balancer_by_lua, which sets each peer itself) saves and resumes no
upstream TLS session whatever the Policy says, so ``sessionReuse: false`` is
served exactly as asked, with no Warning, and the default (``true``) is the
documented difference: every connection to the backend is a full handshake.
Through real NGINX to a real TLS backend that reports each handshake."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testkit.egress import Seen, _backend, _client_secret, _Peer
from testkit.harness import Ferryman, service_with_backends
from testkit.virtualservers import vs


def _egress(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "Policy",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"egressMTLS": {"tlsSecret": "client", **spec}},
    }


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[tuple[_Peer, Seen]]:
    seen = Seen()
    httpd = _backend(tmp_path, seen)  # HTTP/1.0: one request per connection
    try:
        yield _Peer(int(httpd.server_address[1])), seen
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_session_reuse_false_is_served_without_a_warning(
    ferryman: Ferryman, backend: tuple[_Peer, Seen]
) -> None:
    f = ferryman
    peer, seen = backend
    f.write("svc", service_with_backends("app", [peer]))
    f.write("client", _client_secret("client", "alice"))
    f.write("p1", _egress("off", sessionReuse=False))
    f.write("p2", _egress("on"))  # NIC's default: sessionReuse true
    upstream = {"name": "up", "service": "app", "port": 80, "tls": {"enable": True}}
    routes = [
        {"path": f"/{p}", "action": {"pass": "up"}, "policies": [{"name": p}]}
        for p in ("off", "on")
    ]
    f.write("vs", vs("m", "m.test", routes, [upstream]))
    f.start()
    event = f.last_event("m", "AddedOrUpdated", kind="VirtualServer")
    assert event["type"] == "Normal", event
    for p in ("off", "on"):
        for _ in range(3):
            assert f.get("m.test", f"/{p}").status == 200
    assert seen.client == ["alice"] * 6
    # Six connections, six full handshakes: none resumed, either way.
    assert seen.reused == [False] * 6
