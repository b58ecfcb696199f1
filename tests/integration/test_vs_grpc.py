"""VirtualServer gRPC upstreams (``type: grpc``, kinds/virtualserver/records/grpc.py) on real
NGINX with real grpcio backends: grpc_pass from ``@ferryman_grpc``, grpcs for
``tls.enable``, gRPC and HTTP routes on one host, with either fast path."""

from __future__ import annotations

import base64
from typing import Any

import grpc

from ferryman.dataplane.fallback import self_signed
from testkit.egress import _client_secret, _egress
from testkit.grpc_greeter import Greeter, say_hello, say_hellos, status_of
from testkit.harness import Backends, Ferryman, eventually, service_with_backends, tls_secret
from testkit.pki import authority, ca_secret, issue
from testkit.virtualservers import vs
from testkit.vs_policies import policy

HOST = "grpc.test"


def _http2(f: Ferryman, **data: str) -> None:
    f.extra_args += ["--nginx-configmaps", "default/nginx-config"]
    md = {"name": "nginx-config", "namespace": "default"}
    data = {"http2": "true", **data}
    f.write(
        "configmap",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": data},
    )


def _tls(f: Ferryman) -> bytes:
    secret = tls_secret("grpc-tls", [HOST])
    f.write("secret", secret)
    return base64.b64decode(secret["data"]["tls.crt"])


def _host(upstreams: list[dict[str, Any]], routes: list[dict[str, Any]]) -> dict[str, Any]:
    return vs("g", HOST, routes, upstreams, tls={"secret": "grpc-tls"})


def test_grpc_and_http_routes_on_one_host(either_fast_path: Ferryman, backends: Backends) -> None:
    """The gRPC route goes to the greeter over HTTP/2, the HTTP one to the echo
    backend over HTTP/1.1, on the same host and TLS connection settings."""
    f = either_fast_path
    greeter = Greeter("greeter")
    try:
        _http2(f)
        root = _tls(f)
        f.write("g-svc", service_with_backends("greeter", [greeter], port=50051))  # type: ignore[list-item]
        f.write("web-svc", service_with_backends("web", [backends.start("web")]))
        upstreams = [
            {"name": "g", "service": "greeter", "port": 50051, "type": "grpc"},
            {"name": "web", "service": "web", "port": 80},
        ]
        routes = [
            {"path": "/helloworld.Greeter", "action": {"pass": "g"}},
            {"path": "/", "action": {"pass": "web"}},
        ]
        f.write("vs", _host(upstreams, routes))
        f.start()
        assert say_hello(f.https_port, HOST, root)["name"] == "greeter"
        r = f.get(HOST, "/page", https=True)
        assert (r.served_by, r.json()["version"]) == ("web", "HTTP/1.1")
        assert f.events_for("g")[-1]["reason"] == "AddedOrUpdated"
    finally:
        greeter.close()


def test_tls_enable_is_grpcs(ferryman: Ferryman) -> None:
    """``tls.enable``: grpc_pass grpcs:// (NIC's generateGRPCPass), to a greeter
    that speaks TLS only."""
    f = ferryman
    key, crt = self_signed(["greeter.backend"], days=1)
    greeter = Greeter("secure", certificate=(key, crt))
    try:
        _http2(f)
        root = _tls(f)
        f.write("g-svc", service_with_backends("greeter", [greeter], port=50051))  # type: ignore[list-item]
        up = {"name": "g", "service": "greeter", "port": 50051, "type": "grpc"}
        f.write(
            "vs", _host([{**up, "tls": {"enable": True}}], [{"path": "/", "action": {"pass": "g"}}])
        )
        f.start()
        assert say_hello(f.https_port, HOST, root)["name"] == "secure"
        assert f.reloads() == 1
    finally:
        greeter.close()


def test_streams_and_the_configmaps_read_timeout(ferryman: Ferryman) -> None:
    """A server stream passes through the slow path's filters whole; the
    ConfigMap's proxy-read-timeout is the gRPC location's too (NIC writes it as
    grpc_read_timeout): a slower answer is NGINX's 504, gRPC status 14."""
    f = ferryman
    greeter = Greeter("greeter")
    try:
        _http2(f, **{"proxy-read-timeout": "1s"})
        root = _tls(f)
        f.write("g-svc", service_with_backends("greeter", [greeter], port=50051))  # type: ignore[list-item]
        up = {"name": "g", "service": "greeter", "port": 50051, "type": "grpc"}
        f.write("vs", _host([up], [{"path": "/", "action": {"pass": "g"}}]))
        f.start()
        replies = say_hellos(f.https_port, HOST, root, "a b c")
        assert replies == ["Hello a", "Hello b", "Hello c"]
        assert say_hello(f.https_port, HOST, root, "sleep 0.2")["name"] == "greeter"
        slow = status_of(f.https_port, HOST, root, "sleep 2")
        assert slow == (grpc.StatusCode.UNAVAILABLE, "unavailable")
    finally:
        greeter.close()


def test_a_policys_answer_is_a_grpc_status(ferryman: Ferryman) -> None:
    """A route's accessControl Policy denies in the gRPC location: NGINX's 403
    is gRPC status 7 PERMISSION_DENIED, as NIC's error location answers it."""
    f = ferryman
    greeter = Greeter("greeter")
    try:
        _http2(f)
        root = _tls(f)
        f.write("g-svc", service_with_backends("greeter", [greeter], port=50051))  # type: ignore[list-item]
        f.write("deny", policy("deny-local", accessControl={"deny": ["127.0.0.0/8"]}))
        up = {"name": "g", "service": "greeter", "port": 50051, "type": "grpc"}
        route = {"path": "/", "action": {"pass": "g"}, "policies": [{"name": "deny-local"}]}
        f.write("vs", _host([up], [route]))
        f.start()
        denied = status_of(f.https_port, HOST, root)
        assert denied == (grpc.StatusCode.PERMISSION_DENIED, "permission denied")
        assert greeter.calls == 0
    finally:
        greeter.close()


def test_egress_mtls_presents_the_routes_client_certificate(ferryman: Ferryman) -> None:
    """grpcs with an egressMTLS Policy: the greeter, which requires a client
    certificate, sees the route's (grpc_ssl_certificate from the Policy)."""
    f = ferryman
    key, crt = self_signed(["greeter.backend"], days=1)
    greeter = Greeter(
        "secure", certificate=(key, crt), client_ca=authority("egress-client-ca").cert_pem
    )
    try:
        _http2(f)
        root = _tls(f)
        f.write("g-svc", service_with_backends("greeter", [greeter], port=50051))  # type: ignore[list-item]
        f.write("alice", _client_secret("alice-cert", "alice"))
        f.write("pa", _egress("as-alice", "alice-cert"))
        up = {
            "name": "g",
            "service": "greeter",
            "port": 50051,
            "type": "grpc",
            "tls": {"enable": True},
        }
        route = {"path": "/", "action": {"pass": "g"}, "policies": [{"name": "as-alice"}]}
        f.write("vs", _host([up], [route]))
        f.start()
        assert say_hello(f.https_port, HOST, root)["client"] == ["alice"]
        assert f.reloads() == 1
    finally:
        greeter.close()


def test_egress_mtls_verify_server_on_grpcs(ferryman: Ferryman) -> None:
    """verifyServer on a grpcs route: the greeter's certificate (issued by
    backend-ca for greeter.backend) verified against the Policy's CA, over
    HTTP/2 (the verifying context offers ALPN h2); the Policy changed to trust
    another CA: gRPC status 14 "unavailable" (NGINX's 502), the greeter never
    called, with no reload."""
    f = ferryman
    cert = issue("backend-ca", "greeter.backend", server=True)
    greeter = Greeter("secure", certificate=(cert.key_pem, cert.cert_pem))

    def verify(ca: str) -> dict[str, Any]:
        spec = {"trustedCertSecret": ca, "verifyServer": True, "sslName": "greeter.backend"}
        return policy("p", egressMTLS=spec)

    def unavailable() -> bool:
        try:
            say_hello(f.https_port, HOST, root)
        except grpc.RpcError as e:
            return bool(e.code() == grpc.StatusCode.UNAVAILABLE)
        return False

    try:
        _http2(f)
        root = _tls(f)
        f.write("g-svc", service_with_backends("greeter", [greeter], port=50051))  # type: ignore[list-item]
        f.write("ca", ca_secret("backend-ca", authority("backend-ca").cert_pem))
        f.write("other", ca_secret("other-ca", authority("other-ca").cert_pem))
        f.write("p", verify("backend-ca"))
        up = {
            "name": "g",
            "service": "greeter",
            "port": 50051,
            "type": "grpc",
            "tls": {"enable": True},
        }
        f.write(
            "vs", _host([up], [{"path": "/", "action": {"pass": "g"}, "policies": [{"name": "p"}]}])
        )
        f.start()
        assert say_hello(f.https_port, HOST, root)["name"] == "secure"
        f.write("p", verify("other-ca"))
        eventually(unavailable, 60, "status 14")
        calls = greeter.calls
        assert unavailable() and greeter.calls == calls
        assert f.reloads() == 1
    finally:
        greeter.close()
