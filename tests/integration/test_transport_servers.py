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

from tests.integration.harness import Ferryman, eventually, free_port  # noqa: F401

GC = ("nginx-ingress", "nginx-configuration")


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


def global_configuration(*listeners: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "GlobalConfiguration",
        "metadata": {"name": GC[1], "namespace": GC[0]},
        "spec": {"listeners": list(listeners)},
    }


def transport_server(
    name: str, listener: str, protocol: str, service: str, port: int, **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "TransportServer",
        "metadata": {"name": name, "namespace": "default", **spec.pop("metadata", {})},
        "spec": {
            "listener": {"name": listener, "protocol": protocol},
            "upstreams": [{"name": "app", "service": service, "port": port}],
            "action": {"pass": "app"},
            **spec,
        },
    }


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
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(payload)
        return s.recv(4096)


def udp_ask(port: int, payload: bytes = b"hello") -> bytes:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(5)
        s.sendto(payload, ("127.0.0.1", port))
        return s.recvfrom(4096)[0]


def start(ferryman: Ferryman, *extra: str) -> None:
    ferryman.extra_args += ["--global-configuration", "/".join(GC), *extra]
    ferryman.start()


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
