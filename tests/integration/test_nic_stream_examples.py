"""NIC's TransportServer examples (../shared/vendor/nic-examples-v5.5.4), applied
unchanged, behave as their READMEs say, through real NGINX."""

from __future__ import annotations

import socket
import socketserver
import struct
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from testkit.harness import Ferryman
from testkit.nic_fixtures import NIC_EXAMPLES

# The answer our stand-in for CoreDNS gives (the README's for kubernetes.io).
ANSWER = "147.75.40.148"


def _example(ferryman: Ferryman, folder: str, name: str) -> None:
    ferryman.write_text(f"{folder}-{name}", (NIC_EXAMPLES / folder / name).read_text())


def dns_answer(query: bytes) -> bytes:
    """A response to a one-question query: the question, and one A record."""
    ident, _flags, qdcount = struct.unpack("!HHH", query[:6])
    end = 12
    while query[end] != 0:
        end += query[end] + 1
    question = query[12 : end + 5]
    header = struct.pack("!HHHHHH", ident, 0x8180, qdcount, 1, 0, 0)
    record = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 3596, 4) + socket.inet_aton(ANSWER)
    return header + question + record


class _DnsUdp(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        data, sock = self.request
        sock.sendto(dns_answer(data), self.client_address)


class _DnsTcp(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        (length,) = struct.unpack("!H", self.request.recv(2))
        query = b""
        while len(query) < length:
            query += self.request.recv(length - len(query))
        answer = dns_answer(query)
        self.request.sendall(struct.pack("!H", len(answer)) + answer)


@pytest.fixture
def dns_port() -> Iterator[int]:
    """A DNS server on one loopback port, TCP and UDP (as CoreDNS's 5353 in dns.yaml)."""
    for _ in range(50):
        udp = socketserver.ThreadingUDPServer(("127.0.0.1", 0), _DnsUdp)
        port = int(udp.server_address[1])
        try:
            tcp = socketserver.ThreadingTCPServer(("127.0.0.1", port), _DnsTcp)
        except OSError:
            udp.server_close()
            continue
        break
    servers: list[Any] = [udp, tcp]
    for s in servers:
        s.daemon_threads = True
        threading.Thread(target=s.serve_forever, daemon=True).start()
    yield port
    for s in servers:
        s.shutdown()
        s.server_close()


def query(name: str) -> bytes:
    qname = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    return struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + qname + struct.pack("!HH", 1, 1)


def resolved(answer: bytes) -> str:
    ident, _, _, ancount = struct.unpack("!HHHH", answer[:8])
    assert ident == 0x1234 and ancount == 1
    return socket.inet_ntoa(answer[-4:])


def dig_udp(port: int, name: str, address: str = "127.0.0.1") -> str:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.settimeout(5)
        s.sendto(query(name), (address, port))
        return resolved(s.recvfrom(4096)[0])


def dig_tcp(port: int, name: str, address: str = "127.0.0.1") -> str:
    q = query(name)
    with socket.create_connection((address, port), timeout=5) as s:
        s.sendall(struct.pack("!H", len(q)) + q)
        (length,) = struct.unpack("!H", s.recv(2))
        data = b""
        while len(data) < length:
            data += s.recv(length)
        return resolved(data)


def coredns_endpoints(port: int) -> dict[str, Any]:
    """What the cluster would make for dns.yaml's pods: an EndpointSlice of the
    coredns Service with both of its ports."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "coredns-abcde",
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": "coredns"},
        },
        "addressType": "IPv4",
        "ports": [
            {"name": "dns", "port": port, "protocol": "UDP"},
            {"name": "dns-tcp", "port": port, "protocol": "TCP"},
        ],
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
    }


def test_basic_tcp_udp(ferryman: Ferryman, dns_port: int) -> None:
    """README: kubernetes.io resolves through port 5353 of the Ingress Controller over
    TCP and over UDP; the GlobalConfiguration and both TransportServers report success."""
    folder = "basic-tcp-udp"
    for name in ("dns.yaml", "global-configuration.yaml"):
        _example(ferryman, folder, name)
    for name in ("transport-server-tcp.yaml", "transport-server-udp.yaml"):
        _example(ferryman, folder, name)
    ferryman.write("endpoints", coredns_endpoints(dns_port))
    ferryman.extra_args += ["--global-configuration", "nginx-ingress/nginx-configuration"]
    ferryman.start()
    assert dig_tcp(5353, "kubernetes.io") == ANSWER
    assert dig_udp(5353, "kubernetes.io") == ANSWER
    gc = ferryman.events_for("nginx-configuration")[-1]
    assert (gc["reason"], gc["message"]) == (
        "Updated",
        "GlobalConfiguration nginx-ingress/nginx-configuration was added or updated",
    )
    for ts in ("dns-tcp", "dns-udp"):
        event = ferryman.events_for(ts)[-1]
        assert (event["reason"], event["message"]) == (
            "AddedOrUpdated",
            f"Configuration for default/{ts} was added or updated ",
        )


def test_custom_ip_listeners(ferryman: Ferryman, dns_port: int) -> None:
    """README: the listeners bind only the addresses the GlobalConfiguration names
    (127.0.0.1:5353 TCP, 127.0.0.2:5252 and [::1]:5252 UDP; this folder's file adds
    [::1]:5353 TCP), and DNS answers through each."""
    folder = "custom-ip-listeners/transportserver"
    for name in (
        "dns.yaml",
        "global-configuration.yaml",
        "tcp-transport-server.yaml",
        "udp-transport-server.yaml",
    ):
        ferryman.write_text(name, (NIC_EXAMPLES / folder / name).read_text())
    ferryman.write("endpoints", coredns_endpoints(dns_port))
    gc = "default/my-release-nginx-ingress-controller"
    ferryman.extra_args += ["--global-configuration", gc]
    ferryman.start()
    assert dig_tcp(5353, "kubernetes.io", "127.0.0.1") == ANSWER
    assert dig_tcp(5353, "kubernetes.io", "::1") == ANSWER
    assert dig_udp(5252, "kubernetes.io", "127.0.0.2") == ANSWER
    assert dig_udp(5252, "kubernetes.io", "::1") == ANSWER
    with pytest.raises(OSError):  # not on every address
        dig_tcp(5353, "kubernetes.io", "127.0.0.2")
    for ts in ("tcp-dns", "dns-udp"):
        assert ferryman.events_for(ts)[-1]["reason"] == "AddedOrUpdated"
