"""egressMTLS through ferryman to a VirtualServer upstream with ``tls.enable``: each
request reaches the backend with its own route's client certificate, never over a
kept connection another route's certificate opened."""

from __future__ import annotations

from pathlib import Path

from testkit.egress import Seen, _backend, _client_secret, _egress, _Peer
from testkit.harness import Ferryman, service_with_backends
from testkit.virtualservers import vs


def test_each_route_presents_its_own_client_certificate(ferryman: Ferryman, tmp_path: Path) -> None:
    seen = Seen()
    httpd = _backend(tmp_path, seen, keep_alive=True)
    try:
        peer = _Peer(int(httpd.server_address[1]))
        ferryman.write("svc", service_with_backends("app", [peer]))
        ferryman.write("alice", _client_secret("alice-cert", "alice"))
        ferryman.write("bob", _client_secret("bob-cert", "bob"))
        ferryman.write("pa", _egress("as-alice", "alice-cert"))
        ferryman.write("pb", _egress("as-bob", "bob-cert"))
        upstream = {"name": "up", "service": "app", "port": 80, "tls": {"enable": True}}
        routes = [
            {"path": "/a", "action": {"pass": "up"}, "policies": [{"name": "as-alice"}]},
            {"path": "/b", "action": {"pass": "up"}, "policies": [{"name": "as-bob"}]},
        ]
        ferryman.write("vs", vs("m", "m.test", routes, [upstream]))
        ferryman.start()
        # Two workers, each with its pool: enough rounds that a kept connection
        # of one route would serve the other's request.
        for _ in range(10):
            assert ferryman.get("m.test", "/a").status == 200
            assert ferryman.get("m.test", "/b").status == 200
        assert seen.client == ["alice", "bob"] * 10
        assert ferryman.reloads() == 1
    finally:
        httpd.shutdown()
        httpd.server_close()
