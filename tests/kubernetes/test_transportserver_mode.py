"""TransportServers in Kubernetes mode on a real kube-apiserver with deploy/crds: the
GlobalConfiguration named by --global-configuration gives the listener, traffic
goes through it, and ferryman writes NIC's status (state, reason, message)."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from lightkube import Client

from testkit.apiserver import apply, wait_until
from testkit.harness import Ferryman, free_port, service_with_backends
from testkit.netns import BackendHost
from testkit.nic_resources import GlobalConfiguration, TransportServer, status


def _ts(namespace: str, name: str, service: str) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "TransportServer",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "listener": {"name": "web-tcp", "protocol": "TCP"},
            "upstreams": [{"name": "app", "service": service, "port": 80}],
            "action": {"pass": "app"},
        },
    }


def _status(kube: Client, namespace: str, name: str) -> dict[str, Any]:
    return status(kube, TransportServer, name, namespace)


def _through(port: int) -> str:
    """The backend's name, asked over plain TCP (an HTTP request, proxied as bytes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET / HTTP/1.0\r\nHost: tcp.test\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    text = data.decode(errors="replace")
    return "tea" if '"name": "tea"' in text else text[-200:]


def test_transport_server_status_and_traffic(
    crds: Client, namespace: str, backends: BackendHost,
    start_ferryman: Callable[..., Ferryman],
) -> None:  # fmt: skip
    kube = crds
    port = free_port()
    apply(kube, *service_with_backends("tea", [backends.start("tea")], namespace=namespace))
    kube.create(
        GlobalConfiguration(
            {
                "apiVersion": "k8s.nginx.org/v1",
                "kind": "GlobalConfiguration",
                "metadata": {"name": "gc", "namespace": namespace},
                "spec": {"listeners": [{"name": "web-tcp", "port": port, "protocol": "TCP"}]},
            }
        )
    )
    kube.create(TransportServer(_ts(namespace, "first", "tea")))
    f = start_ferryman("ferryman-ts", "--global-configuration", f"{namespace}/gc")
    assert _through(port) == "tea"
    want = {
        "state": "Valid",
        "reason": "AddedOrUpdated",
        "message": f"Configuration for {namespace}/first was added or updated ",
    }
    wait_until(lambda: _status(kube, namespace, "first") == want, 60, "status Valid")
    kube.create(TransportServer(_ts(namespace, "second", "tea")))
    taken = {
        "state": "Warning",
        "reason": "Rejected",
        "message": "Listener web-tcp with host empty host is taken by another resource",
    }
    wait_until(lambda: _status(kube, namespace, "second") == taken, 60, "status Warning")
    assert f.reloads() == 1
