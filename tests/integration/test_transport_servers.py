"""TransportServers on GlobalConfiguration listeners, through real NGINX: TCP and
UDP echo, listener conflicts with NIC's messages, and endpoint changes that reach
the stream balancer (ngx_stream_ferryman_module) without a reload."""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from testkit.configmap_docs import NAME, NS, configmap
from testkit.harness import Ferryman, eventually, free_port
from testkit.transport_docs import GC, global_configuration, transport_server


class _TCPEcho(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        data = self.request.recv(4096)
        self.request.sendall(self.server.name.encode() + b":" + data)  # type: ignore[attr-defined]


class _UDPEcho(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        data, sock = self.request
        server = self.server
        server.datagrams += 1  # type: ignore[attr-defined]
        sock.sendto(server.name.encode() + b":" + data, self.client_address)  # type: ignore[attr-defined]


class Echoes:
    """Loopback TCP and UDP echo servers that answer with their name."""

    def __init__(self) -> None:
        self.servers: list[socketserver.BaseServer] = []

    def tcp(self, name: str) -> int:
        s = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _TCPEcho)
        return self._run(s, name)

    def udp(self, name: str) -> socketserver.UDPServer:
        s = socketserver.ThreadingUDPServer(("127.0.0.1", 0), _UDPEcho)
        s.datagrams = 0  # type: ignore[attr-defined]
        self._run(s, name)
        return s

    def _run(self, s: Any, name: str) -> int:
        s.daemon_threads = True
        s.name = name
        threading.Thread(target=s.serve_forever, daemon=True).start()
        self.servers.append(s)
        return int(s.server_address[1])

    def close(self) -> None:
        for s in self.servers:
            s.shutdown()
            s.server_close()


@pytest.fixture
def echoes() -> Iterator[Echoes]:
    e = Echoes()
    yield e
    e.close()


def stream_service(name: str, ports: list[int], port: int = 7000) -> list[dict[str, Any]]:
    """A Service on ``port`` and an EndpointSlice with one loopback endpoint per
    backend port (the backends differ by port, as in harness.service_with_backends)."""
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"ports": [{"port": port, "name": "p"}]},
        }
    ]
    for i, p in enumerate(ports):
        docs.append(
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": f"{name}-{i}",
                    "namespace": "default",
                    "labels": {"kubernetes.io/service-name": name},
                },
                "addressType": "IPv4",
                "ports": [{"name": "p", "port": p}],
                "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
            }
        )
    return docs


def tcp_ask(port: int, payload: bytes = b"hello") -> bytes:
    """One request, read to the end: NGINX closes the client's side only after it has
    released the upstream peer, so a caller that asks again finds the peer's
    connection no longer counted (maxConns) rather than racing its release."""
    answer = b""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(payload)
        while chunk := s.recv(4096):
            answer += chunk
    return answer


def udp_ask(port: int, payload: bytes = b"hello") -> bytes:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(5)
        s.sendto(payload, ("127.0.0.1", port))
        return s.recvfrom(4096)[0]


def start(ferryman: Ferryman, *extra: str) -> None:
    ferryman.extra_args += ["--global-configuration", "/".join(GC), *extra]
    ferryman.start()


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_tcp_and_udp_echo(ferryman: Ferryman, echoes: Echoes) -> None:
    tcp_port, udp_port = free_port(), free_port()
    backend_tcp = echoes.tcp("tcp-a")
    backend_udp = echoes.udp("udp-a")
    ferryman.write(
        "gc",
        global_configuration(
            {"name": "echo-tcp", "port": tcp_port, "protocol": "TCP"},
            {"name": "echo-udp", "port": udp_port, "protocol": "UDP"},
        ),
    )
    ferryman.write("svc-tcp", stream_service("echo-tcp", [backend_tcp]))
    ferryman.write("svc-udp", stream_service("echo-udp", [backend_udp.server_address[1]]))
    ferryman.write("ts-tcp", transport_server("ts-tcp", "echo-tcp", "TCP", "echo-tcp", 7000))
    ferryman.write(
        "ts-udp",
        transport_server(
            "ts-udp",
            "echo-udp",
            "UDP",
            "echo-udp",
            7000,
            upstreamParameters={"udpRequests": 1, "udpResponses": 1},
        ),
    )
    start(ferryman)
    assert tcp_ask(tcp_port) == b"tcp-a:hello"
    for i in range(3):
        assert udp_ask(udp_port, b"q%d" % i) == b"udp-a:q%d" % i
    assert backend_udp.datagrams == 3  # type: ignore[attr-defined]
    event = ferryman.events_for("ts-tcp")[-1]
    assert (event["reason"], event["message"]) == (
        "AddedOrUpdated",
        "Configuration for default/ts-tcp was added or updated ",
    )
    gc_event = ferryman.events_for(GC[1])[-1]
    assert gc_event["reason"] == "Updated", gc_event
    assert ferryman.reloads() == 1
    m = ferryman.metrics()
    name = "nginx_ingress_controller_transportserver_resources_total"
    assert [m[f'{name}{{type="{t}"}}'] for t in ("passthrough", "tcp", "udp")] == [0, 1, 1]


def _listeners(tcp_port: int) -> dict[str, Any]:
    return global_configuration({"name": "echo-tcp", "port": tcp_port, "protocol": "TCP"})


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_endpoint_changes_reach_the_stream_side_without_reload(
    ferryman: Ferryman, echoes: Echoes
) -> None:
    tcp_port = free_port()
    a, b = echoes.tcp("a"), echoes.tcp("b")
    ferryman.write("gc", _listeners(tcp_port))
    ferryman.write("svc", stream_service("echo", [a]))
    ferryman.write(
        "ts",
        transport_server(
            "ts", "echo-tcp", "TCP", "echo", 7000, upstreams=[
                {"name": "app", "service": "echo", "port": 7000,
                 "loadBalancingMethod": "round_robin"}
            ],
        ),
    )  # fmt: skip
    start(ferryman)
    reloads = ferryman.reloads()
    assert tcp_ask(tcp_port) == b"a:hello"
    ferryman.write("svc", stream_service("echo", [a, b]))
    eventually(
        lambda: {tcp_ask(tcp_port) for _ in range(6)} == {b"a:hello", b"b:hello"},
        what="both endpoints answer",
    )
    ferryman.write("svc", stream_service("echo", [b]))
    eventually(lambda: {tcp_ask(tcp_port) for _ in range(4)} == {b"b:hello"}, what="only b answers")
    # The balancing method lives in the record too: no reload either.
    ferryman.write("ts", transport_server("ts", "echo-tcp", "TCP", "echo", 7000, upstreams=[
        {"name": "app", "service": "echo", "port": 7000, "loadBalancingMethod": "least_conn",
         "maxFails": 3}
    ]))  # fmt: skip
    eventually(lambda: ferryman.events_for("ts")[-1]["reason"] == "AddedOrUpdated")
    assert tcp_ask(tcp_port) == b"b:hello"
    assert ferryman.reloads() == reloads
    # A connect timeout is a directive of the listener's server: one reload.
    ferryman.write(
        "ts",
        transport_server(
            "ts", "echo-tcp", "TCP", "echo", 7000, upstreamParameters={"connectTimeout": "5s"}
        ),
    )
    eventually(lambda: ferryman.reloads() == reloads + 1, what="a reload")
    assert tcp_ask(tcp_port) == b"b:hello"


def test_no_endpoint_closes_the_connection(ferryman: Ferryman, echoes: Echoes) -> None:
    tcp_port = free_port()
    ferryman.write("gc", _listeners(tcp_port))
    ferryman.write("svc", stream_service("echo", []))
    ferryman.write("ts", transport_server("ts", "echo-tcp", "TCP", "echo", 7000))
    start(ferryman)
    with socket.create_connection(("127.0.0.1", tcp_port), timeout=5) as s:
        s.sendall(b"hello")
        try:
            answer = s.recv(4096)
        except ConnectionResetError:
            answer = b""
        assert answer == b""  # closed, nothing proxied


def test_listener_conflicts_with_nic_messages(ferryman: Ferryman, echoes: Echoes) -> None:
    tcp_port = free_port()
    a, b = echoes.tcp("a"), echoes.tcp("b")
    ferryman.write(
        "gc",
        global_configuration(
            {"name": "echo-tcp", "port": tcp_port, "protocol": "TCP"},
            {"name": "echo-tcp", "port": free_port(), "protocol": "TCP"},
            {"name": "bad_name", "port": free_port(), "protocol": "SCTP"},
        ),
    )
    ferryman.write("svc-a", stream_service("echo-a", [a]))
    ferryman.write("svc-b", stream_service("echo-b", [b]))
    old = {"creationTimestamp": "2024-01-01T00:00:00Z"}
    new = {"creationTimestamp": "2025-01-01T00:00:00Z"}
    ferryman.write(
        "ts-new", transport_server("ts-new", "echo-tcp", "TCP", "echo-b", 7000, metadata=new)
    )
    ferryman.write(
        "ts-old", transport_server("ts-old", "echo-tcp", "TCP", "echo-a", 7000, metadata=old)
    )
    ferryman.write("ts-none", transport_server("ts-none", "nope", "TCP", "echo-a", 7000))
    ferryman.write("ts-udp", transport_server("ts-udp", "echo-tcp", "UDP", "echo-a", 7000))
    start(ferryman)
    assert tcp_ask(tcp_port) == b"a:hello"
    last = {n: ferryman.events_for(n)[-1] for n in ("ts-new", "ts-none", "ts-udp", "ts-old")}
    assert (last["ts-new"]["reason"], last["ts-new"]["message"]) == (
        "Rejected",
        "Listener echo-tcp with host empty host is taken by another resource",
    )
    assert last["ts-none"]["message"] == "Listener nope doesn't exist"
    # The listener's name with another protocol is another listener (NIC).
    assert last["ts-udp"]["message"] == "Listener echo-tcp doesn't exist"
    assert last["ts-old"]["reason"] == "AddedOrUpdated"
    gc = ferryman.events_for(GC[1])[-1]
    assert gc["reason"] == "AddedOrUpdatedWithError"
    assert gc["message"].startswith(
        f"GlobalConfiguration {GC[0]}/{GC[1]} is updated with errors: ["
        'spec.listeners[1].name: Duplicate value: "echo-tcp", '
        'spec.listeners[2].name: Invalid value: "bad_name": a DNS-1035 label must consist of'
    ), gc["message"]
    assert 'spec.listeners[2].protocol: Invalid value: "SCTP": must specify a valid protocol. ' \
        "Accepted values: HTTP,TCP,UDP" in gc["message"]  # fmt: skip
    # The holder goes: the next oldest takes the listener, without a reload.
    reloads = ferryman.reloads()
    ferryman.remove("ts-old")
    eventually(lambda: tcp_ask(tcp_port) == b"b:hello", what="ts-new takes the listener")
    ferryman.last_event("ts-new", "AddedOrUpdated")
    assert ferryman.reloads() == reloads


def test_invalid_transport_server_is_rejected(ferryman: Ferryman) -> None:
    ferryman.write("gc", _listeners(free_port()))
    ts = transport_server("ts", "echo-tcp", "TCP", "echo", 0, action={"pass": "other"})
    ferryman.write("ts", ts)
    start(ferryman)
    event = ferryman.events_for("ts")[-1]
    assert (event["reason"], event["message"]) == (
        "Rejected",
        "TransportServer default/ts was rejected with error: ["
        "spec.upstreams[0].port: Invalid value: 0: must be between 1 and 65535, inclusive, "
        'spec.action.pass: Not found: "other"]',
    )


def test_listeners_come_and_go_with_one_reload_each(ferryman: Ferryman, echoes: Echoes) -> None:
    first, second = free_port(), free_port()
    a = echoes.tcp("a")
    ferryman.write("gc", _listeners(first))
    ferryman.write("svc", stream_service("echo", [a]))
    ferryman.write("ts", transport_server("ts", "echo-tcp", "TCP", "echo", 7000))
    ferryman.write("ts2", transport_server("ts2", "other", "TCP", "echo", 7000))
    start(ferryman)
    reloads = ferryman.reloads()
    ferryman.write(
        "gc",
        global_configuration(
            {"name": "echo-tcp", "port": first, "protocol": "TCP"},
            {"name": "other", "port": second, "protocol": "TCP"},
        ),
    )
    eventually(lambda: tcp_ask(second) == b"a:hello", what="the new listener")
    ferryman.reloads_reach(reloads + 1)
    ferryman.last_event("ts2", "AddedOrUpdated")
    ferryman.remove("gc")
    eventually(lambda: ferryman.reloads() == reloads + 2, what="the listeners gone")

    def refused() -> bool:
        try:
            tcp_ask(first)
        except OSError:
            return True
        return False

    eventually(refused, what="the port closed")
    # The Event comes after the reload that closed the port.
    eventually(
        lambda: ferryman.events_for("ts")[-1]["message"] == "Listener echo-tcp doesn't exist",
        what="ts told its listener is gone",
    )


def _outcome(port: int) -> bytes:
    try:
        return tcp_ask(port)
    except OSError:
        return b""


def _upstream(**fields: Any) -> list[dict[str, Any]]:
    return [{"name": "app", "service": "echo", "port": 7000, **fields}]


def test_next_upstream_and_passive_health_come_from_the_record(
    ferryman: Ferryman, echoes: Echoes
) -> None:
    tcp_port, dead = free_port(), free_port()  # nothing listens on dead
    a = echoes.tcp("a")
    ferryman.write("gc", _listeners(tcp_port))
    ferryman.write("svc", stream_service("echo", [dead, a]))
    rr = _upstream(loadBalancingMethod="round_robin", maxFails=0)
    ferryman.write("ts", transport_server("ts", "echo-tcp", "TCP", "echo", 7000, upstreams=rr))
    start(ferryman)
    # NIC's default: no next upstream; never out (maxFails 0): half the connections fail.
    answers = [_outcome(tcp_port) for _ in range(6)]
    assert answers.count(b"") == 3 and answers.count(b"a:hello") == 3, answers
    reloads = ferryman.reloads()
    ferryman.write(
        "ts",
        transport_server(
            "ts",
            "echo-tcp",
            "TCP",
            "echo",
            7000,
            upstreams=rr,
            upstreamParameters={"nextUpstream": True, "nextUpstreamTries": 2},
        ),
    )
    eventually(
        lambda: [_outcome(tcp_port) for _ in range(6)] == [b"a:hello"] * 6,
        what="every connection moves on to the live peer",
    )
    assert ferryman.reloads() == reloads


def test_backup_peers_serve_when_the_primary_ones_cannot(
    ferryman: Ferryman, echoes: Echoes
) -> None:
    tcp_port, dead = free_port(), free_port()
    spare = echoes.tcp("spare")
    ferryman.write("gc", _listeners(tcp_port))
    ferryman.write("svc", stream_service("echo", [dead]))
    ferryman.write("spare", stream_service("spare", [spare], port=7001))
    ups = _upstream(loadBalancingMethod="round_robin", backup="spare", backupPort=7001)
    ferryman.write(
        "ts",
        transport_server(
            "ts", "echo-tcp", "TCP", "echo", 7000, upstreams=ups,
            upstreamParameters={"nextUpstream": True},
        ),
    )  # fmt: skip
    start(ferryman)
    assert [tcp_ask(tcp_port) for _ in range(3)] == [b"spare:hello"] * 3
    # No primary endpoint at all: the backup still serves.
    ferryman.write("svc", stream_service("echo", []))
    eventually(lambda: ferryman.events_for("ts")[-1]["reason"] == "AddedOrUpdated")
    assert tcp_ask(tcp_port) == b"spare:hello"


def test_max_conns_counts_connections_over_all_workers(ferryman: Ferryman, echoes: Echoes) -> None:
    tcp_port = free_port()
    a, b = echoes.tcp("a"), echoes.tcp("b")
    ferryman.write("gc", _listeners(tcp_port))
    ferryman.write("svc", stream_service("echo", [a, b]))
    ups = _upstream(loadBalancingMethod="round_robin", maxConns=1)
    ferryman.write("ts", transport_server("ts", "echo-tcp", "TCP", "echo", 7000, upstreams=ups))
    start(ferryman)
    held = socket.create_connection(("127.0.0.1", tcp_port), timeout=5)
    try:
        # The held connection's peer is busy until it ends: the others all go elsewhere.
        eventually(lambda: len({tcp_ask(tcp_port) for _ in range(2)}) == 1, what="one peer")
        others = {tcp_ask(tcp_port) for _ in range(6)}
        held.sendall(b"hello")
        mine = held.recv(4096)
    finally:
        held.close()
    assert len(others) == 1 and mine not in others, (mine, others)


def _tls_ask(port: int, sni: str) -> tuple[bytes, bytes]:
    """(the certificate presented, the echo) over TLS with SNI ``sni``."""
    import ssl

    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    with context.wrap_socket(raw, server_hostname=sni) as s:
        s.sendall(b"hello")
        return s.getpeercert(binary_form=True) or b"", s.recv(4096)


@pytest.mark.flavours("nginx", "nginx-1.30", "angie")
def test_tls_ends_in_nginx_with_the_transport_servers_secret(
    ferryman: Ferryman, echoes: Echoes
) -> None:
    import base64
    import ssl

    from testkit.harness import tls_secret

    port = free_port()
    a, b = echoes.tcp("a"), echoes.tcp("b")
    ferryman.write("gc", global_configuration({"name": "tls-tcp", "port": port, "protocol": "TCP"}))
    ferryman.write("svc-a", stream_service("echo-a", [a]))
    ferryman.write("svc-b", stream_service("echo-b", [b]))
    secret_a = tls_secret("a-tls", ["a.example.com"])
    ferryman.write("secret-a", secret_a)
    for name, host, secret in (
        ("ts-a", "a.example.com", "a-tls"),
        ("ts-b", "b.example.com", "b-tls"),
    ):
        ferryman.write(
            name,
            transport_server(
                name, "tls-tcp", "TCP", f"echo-{name[-1]}", 7000, host=host,
                tls={"secret": secret},
            ),
        )  # fmt: skip
    start(ferryman)
    certificate, answer = _tls_ask(port, "a.example.com")
    pem = base64.b64decode(secret_a["data"]["tls.crt"]).decode()
    assert certificate == ssl.PEM_cert_to_DER_cert(pem)
    assert answer == b"a:hello"  # the backend got plain bytes
    # b-tls does not exist: its host's handshakes are refused, with NIC's warning shape.
    with pytest.raises(ssl.SSLError):
        _tls_ask(port, "b.example.com")
    event = ferryman.events_for("ts-b")[-1]
    assert (event["reason"], event["message"]) == (
        "AddedOrUpdatedWithWarning",
        "Configuration for default/ts-b was added or updated with warning(s): TLS secret b-tls "
        "is invalid: not found; TLS handshakes are refused",
    )
    # The Secret comes: served, without a reload.
    reloads = ferryman.reloads()
    ferryman.write("secret-b", tls_secret("b-tls", ["b.example.com"]))
    eventually(lambda: _tls_ask(port, "b.example.com")[1] == b"b:hello", what="b served")
    ferryman.last_event("ts-b", "AddedOrUpdated")
    assert ferryman.reloads() == reloads


def test_stream_log_format_logs_connections_where_access_log_logs(
    ferryman: Ferryman, echoes: Echoes
) -> None:
    """NIC's stream-log-format: each TransportServer connection is logged with
    it (escaped into a quoted string, as log-format) where access-log logs."""
    log = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    log.bind(("127.0.0.1", 0))
    log.settimeout(10)
    tcp_port = free_port()
    ferryman.write(
        "gc", global_configuration({"name": "echo-tcp", "port": tcp_port, "protocol": "TCP"})
    )
    ferryman.write("svc-tcp", stream_service("echo-tcp", [echoes.tcp("tcp-a")]))
    ferryman.write("ts-tcp", transport_server("ts-tcp", "echo-tcp", "TCP", "echo-tcp", 7000))
    ferryman.write(
        "cm",
        configmap(
            access_log=f"syslog:server=127.0.0.1:{log.getsockname()[1]},tag=streamtest",
            stream_log_format="stream-line $protocol $status in=$bytes_received quote=' {;",
        ),
    )
    start(ferryman, "--nginx-configmaps", f"{NS}/{NAME}")
    assert tcp_ask(tcp_port) == b"tcp-a:hello"
    line = log.recv(65536).decode()
    assert "streamtest:" in line
    assert line.endswith("stream-line TCP 200 in=5 quote=' {;"), line
    log.close()
