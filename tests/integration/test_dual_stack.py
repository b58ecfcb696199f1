"""Dual stack through real NGINX (and Angie): every public port also listens on
IPv6 ([::], ipv6only=on) as NIC's do, and --disable-ipv6 (NIC's -disable-ipv6)
keeps them IPv4 only. IPv6 clients ([::1]) on the HTTP and HTTPS ports (SNI),
Ingresses' listen-ports, TransportServer listeners, Gateway listeners; the
client's address as NGINX's $remote_addr features see it (accessControl,
rate-limit keys, X-Real-IP)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import socketserver
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from testkit.gateway_docs import gateway, gateway_class, route, served, to
from testkit.harness import (
    Backends,
    Ferryman,
    Response,
    _insecure_context,
    free_port,
    ingress,
    path,
    rule,
    service_with_backends,
    tls_secret,
)
from testkit.tls_backends import TlsBackend, https, start_tls_backend
from testkit.transport_docs import GC, global_configuration, transport_server
from testkit.virtualservers import start_with_backends, vs
from testkit.virtualservers import to as vs_to
from testkit.vs_policies import policy, rate_limit, refs

V6 = "[::1]"
V4 = "127.0.0.1"


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.sendall(b"echo:" + self.request.recv(4096))


@pytest.fixture
def echo_port() -> Iterator[int]:
    """A loopback TCP echo server's port."""
    server = socketserver.ThreadingTCPServer((V4, 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


def get(
    address: str,
    port: int,
    host: str,
    p: str = "/",
    *,
    https: bool = False,
    headers: dict[str, str] | None = None,
) -> Response:
    scheme = "https" if https else "http"
    ext = {"sni_hostname": host} if https else {}
    with httpx.Client(verify=_insecure_context(), timeout=10) as c:
        req = c.build_request(
            "GET",
            f"{scheme}://{address}:{port}{p}",
            headers={"Host": host, **(headers or {})},
            extensions=ext,
        )
        r = c.send(req, follow_redirects=False)
    return Response(r.status_code, r.headers, r.text)


def _tls_ingress(ferryman: Ferryman, backends: Backends, *extra: str) -> None:
    ferryman.write("svc", service_with_backends("web", [backends.start("web")]))
    ferryman.write("secret", tls_secret("a-tls", ["a.example.com"]))
    ferryman.write(
        "ing",
        ingress(
            "web",
            [rule("a.example.com", path("/", "web"))],
            tls=[{"hosts": ["a.example.com"], "secretName": "a-tls"}],
        ),
    )
    ferryman.extra_args += list(extra)
    ferryman.start()


def _sni_names(address: str, port: int, sni: str) -> list[str]:
    """The DNS names of the certificate served for ``sni``."""
    from cryptography import x509

    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection((address.strip("[]"), port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname=sni) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    san = x509.load_der_x509_certificate(der).extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    )
    return list(san.value.get_values_for_type(x509.DNSName))


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_ipv6_clients_are_served_on_the_http_and_https_ports(
    ferryman: Ferryman, backends: Backends
) -> None:
    status_port = free_port()
    _tls_ingress(ferryman, backends, "--nginx-status-port", str(status_port))
    for address in (V6, V4):
        r = get(address, ferryman.https_port, "a.example.com", https=True)
        assert (r.status, r.served_by) == (200, "web"), address
        # The client's own address reaches the backend (X-Real-IP: $remote_addr),
        # an IPv4 one unmapped: the IPv6 socket is IPv6 only.
        assert r.json()["headers"]["x-real-ip"] == address.strip("[]")
        # TLS redirect for the HTTP port (the host has TLS): NIC's 301.
        assert get(address, ferryman.http_port, "a.example.com").status == 301
    assert _sni_names(V6, ferryman.https_port, "a.example.com") == ["a.example.com"]
    # No host: the default server answers IPv6 clients too.
    assert get(V6, ferryman.http_port, "nowhere.example.com").status == 404
    # stub_status for the allowed networks (127.0.0.1 and ::1 by default).
    assert get(V6, status_port, "status", "/stub_status").text.startswith("Active connections")
    # ferryman's own readiness port, which kubelets probe on the pod's address.
    assert httpx.get(f"http://{V6}:{ferryman.ready_port}/nginx-ready", timeout=5).status_code == 200


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_disable_ipv6_refuses_ipv6_clients_while_ipv4_serves(
    ferryman: Ferryman, backends: Backends
) -> None:
    _tls_ingress(ferryman, backends, "--disable-ipv6")
    for port in (ferryman.http_port, ferryman.https_port):
        with pytest.raises(httpx.ConnectError):
            get(V6, port, "a.example.com", https=port == ferryman.https_port)
    assert get(V4, ferryman.https_port, "a.example.com", https=True).served_by == "web"
    assert "IPv6 is not available" not in ferryman.logs()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://{V6}:{ferryman.ready_port}/nginx-ready", timeout=5)


def test_nics_disable_ipv6_spelling(tmp_path: Path, backends: Backends) -> None:
    f = Ferryman(
        tmp_path, nic_flags=True, extra_args=["-disable-ipv6=true", "-ingress-class=ferryman"]
    )
    try:
        _tls_ingress(f, backends)
        with pytest.raises(httpx.ConnectError):
            get(V6, f.http_port, "a.example.com")
        assert get(V4, f.https_port, "a.example.com", https=True).served_by == "web"
    finally:
        f.stop()


def test_listen_ports_and_http_listeners_take_ipv6_clients(
    ferryman: Ferryman, backends: Backends
) -> None:
    plain, local, own = free_port(), free_port(), free_port()
    ferryman.write("svc", service_with_backends("web", [backends.start("web")]))
    ferryman.write(
        "ing",
        ingress(
            "web",
            [rule("a.example.com", path("/", "web"))],
            annotations={"nginx.org/listen-ports": str(plain)},
        ),
    )
    # GlobalConfiguration HTTP listeners: without addresses, on an IPv4 one
    # (NIC: and every IPv6 address), and on both families' own.
    ferryman.write(
        "gc",
        global_configuration(
            {"name": "http-local", "port": local, "protocol": "HTTP", "ipv4": V4},
            {"name": "http-own", "port": own, "protocol": "HTTP", "ipv4": V4, "ipv6": "::1"},
        ),
    )
    ferryman.write(
        "vs",
        vs(
            "cafe",
            "cafe.test",
            [{"path": "/", "action": vs_to("web")}],
            upstreams=[{"name": "web", "service": "web", "port": 80}],
            listener={"http": "http-local"},
        ),
        vs(
            "tea",
            "tea.test",
            [{"path": "/", "action": vs_to("web")}],
            upstreams=[{"name": "web", "service": "web", "port": 80}],
            listener={"http": "http-own"},
        ),
    )
    ferryman.extra_args += ["--global-configuration", "/".join(GC)]
    ferryman.start()
    for address in (V6, V4):
        assert get(address, plain, "a.example.com").served_by == "web", address
        assert get(address, local, "cafe.test").served_by == "web", address
        assert get(address, own, "tea.test").served_by == "web", address


def test_transport_server_listeners_take_ipv6_clients(ferryman: Ferryman, echo_port: int) -> None:
    tcp_port, v4_port = free_port(), free_port()
    ferryman.write(
        "gc",
        global_configuration(
            {"name": "echo-tcp", "port": tcp_port, "protocol": "TCP"},
            # An IPv4 address of its own: every IPv6 address too, as NIC.
            {"name": "echo-v4", "port": v4_port, "protocol": "TCP", "ipv4": V4},
        ),
    )
    svc = service_with_backends("echo", [_Port("echo", echo_port)], port=7000)  # type: ignore[list-item]
    ferryman.write("svc", svc)
    for name, listener in (("ts", "echo-tcp"), ("ts-v4", "echo-v4")):
        ferryman.write(
            name,
            {
                "apiVersion": "k8s.nginx.org/v1",
                "kind": "TransportServer",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {
                    "listener": {"name": listener, "protocol": "TCP"},
                    "upstreams": [{"name": "app", "service": "echo", "port": 7000}],
                    "action": {"pass": "app"},
                },
            },
        )
    ferryman.extra_args += ["--global-configuration", "/".join(GC)]
    ferryman.start()
    for address in ("::1", V4):
        for port in (tcp_port, v4_port):
            assert _tcp_ask(address, port) == b"echo:hello", (address, port)


class _Port:
    """A backend service_with_backends can list: a name and a loopback port."""

    def __init__(self, name: str, port: int) -> None:
        self.name, self.port = name, port


def _tcp_ask(address: str, port: int) -> bytes:
    answer = b""
    with socket.create_connection((address, port), timeout=5) as s:
        s.sendall(b"hello")
        while chunk := s.recv(4096):
            answer += chunk
    return answer


def test_gateway_listeners_on_every_address_take_ipv6_clients(
    ferryman: Ferryman, backends: Backends
) -> None:
    port = free_port()
    ferryman.write("svc", service_with_backends("tea", [backends.start("tea")]))
    ferryman.write("class", gateway_class())
    ferryman.write("gw", gateway("one", [{"name": "http", "port": port, "protocol": "HTTP"}]))
    ferryman.write("route", route("r1", "one", ["cafe.example.com"], [to("tea")]))
    ferryman.extra_args += ["--enable-gateway-api"]
    ferryman.start()
    assert served(V6, port, "cafe.example.com") == "tea"
    assert served(V4, port, "cafe.example.com") == "tea"
    assert served(V6, port, "other.example.com") == "404"


def test_access_control_and_rate_limits_see_ipv6_clients(
    ferryman: Ferryman, backends: Backends
) -> None:
    routes = [
        {"path": "/", "action": vs_to("a")},
        {"path": "/v6", "action": vs_to("a"), "policies": refs("only-v6")},
        {"path": "/no-v6", "action": vs_to("a"), "policies": refs("no-v6")},
        {"path": "/limited", "action": vs_to("a"), "policies": refs("everyone", "per-client")},
    ]
    start_with_backends(
        ferryman,
        backends,
        policy("ten", accessControl={"allow": ["10.0.0.0/8", "127.0.0.0/8"]}),
        policy("only-v6", accessControl={"allow": ["::1/128"]}),
        policy("no-v6", accessControl={"deny": ["::1"]}),
        policy("everyone", accessControl={"allow": ["0.0.0.0/0", "::/0"]}),
        rate_limit("per-client", rate="1r/m", key="${binary_remote_addr}"),
        vs("cafe", "cafe.test", routes, policies=refs("ten")),
    )
    port = ferryman.http_port

    def status(address: str, p: str) -> int:
        return get(address, port, "cafe.test", p).status

    # allow 10.0.0.0/8 and 127.0.0.0/8: an IPv6 client is in neither.
    assert (status(V6, "/"), status(V4, "/")) == (403, 200)
    assert (status(V6, "/v6"), status(V4, "/v6")) == (200, 403)
    assert (status(V6, "/no-v6"), status(V4, "/no-v6")) == (403, 200)
    # One bucket per client address: the IPv6 client's own 16 bytes.
    assert [status(V6, "/limited") for _ in range(2)] == [200, 503]
    assert status(V4, "/limited") == 200


@pytest.fixture
def tls_backend() -> Iterator[TlsBackend]:
    backend = start_tls_backend("secure-app", ["app.example.com"])
    yield backend
    backend.close()


def test_tls_passthrough_takes_ipv6_clients_and_keeps_their_address(
    ferryman: Ferryman, tls_backend: TlsBackend, backends: Backends
) -> None:
    """The stream server owning the HTTPS port listens on IPv6 too; the hop to
    ferryman's HTTPS server (PROXY protocol) carries the IPv6 client's address."""
    ferryman.write("cafe", service_with_backends("cafe", [backends.start("cafe")]))
    ferryman.write("secret", tls_secret("cafe-tls", ["cafe.example.com"]))
    ferryman.write(
        "ing",
        ingress(
            "cafe",
            [rule("cafe.example.com", path("/", "cafe"))],
            tls=[{"hosts": ["cafe.example.com"], "secretName": "cafe-tls"}],
        ),
    )
    ferryman.write(
        "ts",
        transport_server(
            "secure-app",
            "tls-passthrough",
            "TLS_PASSTHROUGH",
            "secure-app",
            8443,
            host="app.example.com",
        ),
    )
    ferryman.write(
        "app",
        service_with_backends(
            "secure-app",
            [_Port("app", tls_backend.port)],  # type: ignore[list-item]
            port=8443,
        ),
    )
    ferryman.extra_args += ["--enable-tls-passthrough"]
    ferryman.start()
    certificate, response = https(ferryman.https_port, "app.example.com", "::1")
    assert certificate == tls_backend.certificate
    assert response.endswith("hello from pod secure-app\n"), response
    r = get(V6, ferryman.https_port, "cafe.example.com", https=True)
    assert r.served_by == "cafe"
    assert r.json()["headers"]["x-real-ip"] == "::1"
    assert r.json()["headers"]["x-forwarded-port"] == str(ferryman.https_port)


CLONE_NEWNET = 0x40000000


@contextlib.contextmanager
def network_without_ipv6() -> Iterator[None]:
    """This thread in a network namespace of its own whose IPv6 is off
    (net.ipv6.conf.all.disable_ipv6=1, loopback up): processes it starts are
    in there too, and its sockets. Needs root and iproute2, as testkit/netns.py."""
    name = f"ferryman-v6off-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        for command in (
            ["ip", "link", "set", "lo", "up"],
            ["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"],
        ):
            subprocess.run(["ip", "netns", "exec", name, *command], check=True)
        libc = ctypes.CDLL(None, use_errno=True)
        with (
            Path("/proc/thread-self/ns/net").open() as home,
            Path(f"/run/netns/{name}").open() as there,
        ):
            if libc.setns(there.fileno(), CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns")
            try:
                yield
            finally:
                assert libc.setns(home.fileno(), CLONE_NEWNET) == 0
    finally:
        subprocess.run(["ip", "netns", "del", name], check=True)


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_a_machine_without_ipv6_is_served_on_ipv4_with_one_warning(
    ferryman: Ferryman, backends: Backends
) -> None:
    with network_without_ipv6():
        _tls_ingress(ferryman, backends)
        try:
            assert get(V4, ferryman.https_port, "a.example.com", https=True).served_by == "web"
            assert get(V4, ferryman.http_port, "a.example.com").status == 301
        finally:
            ferryman.stop()
    warnings = [line for line in ferryman.logs().splitlines() if "IPv6 is not available" in line]
    assert len(warnings) == 1, ferryman.logs()
    assert "disable_ipv6 is 1" in warnings[0]
    assert "[::]" not in (ferryman.state / "nginx.conf").read_text()
