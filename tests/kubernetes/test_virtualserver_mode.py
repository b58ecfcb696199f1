"""VirtualServers in Kubernetes mode on a real kube-apiserver with deploy/crds: the
informer delivers them, traffic follows them with no reload, and ferryman writes
NIC's status (state, reason, message) through the status subresource."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lightkube import Client

from testkit.apiserver import apply, wait_until
from testkit.harness import Ferryman, served_by, service_with_backends
from testkit.netns import BackendHost
from testkit.nic_resources import VirtualServer, put, status


def _vs(namespace: str, upstream: str, path: str = "/") -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": {"name": "cafe", "namespace": namespace},
        "spec": {
            "host": "vs.k8s.test",
            "upstreams": [{"name": "up", "service": upstream, "port": 80}],
            "routes": [{"path": path, "action": {"pass": "up"}}],
        },
    }


def _status(kube: Client, namespace: str) -> dict[str, Any]:
    return status(kube, VirtualServer, "cafe", namespace)


def test_virtual_server_is_served_and_valid(
    crds: Client, namespace: str, backends: BackendHost,
    start_ferryman: Callable[..., Ferryman],
) -> None:  # fmt: skip
    kube = crds
    apply(kube, *service_with_backends("tea", [backends.start("tea")], namespace=namespace))
    apply(kube, *service_with_backends("coffee", [backends.start("coffee")], namespace=namespace))
    put(kube, VirtualServer, _vs(namespace, "tea"))
    f = start_ferryman("ferryman-vs")
    assert served_by(f, "vs.k8s.test", "/") == "tea"
    want = {
        "state": "Valid",
        "reason": "AddedOrUpdated",
        "message": f"Configuration for {namespace}/cafe was added or updated ",
    }
    wait_until(lambda: _status(kube, namespace) == want, 60, "status Valid")

    put(kube, VirtualServer, _vs(namespace, "coffee"))
    wait_until(lambda: served_by(f, "vs.k8s.test", "/") == "coffee", 60, "the update")
    put(kube, VirtualServer, _vs(namespace, "coffee", path="/a{b}"))  # refused by the parser
    invalid = wait_until(
        lambda: (s := _status(kube, namespace)).get("state") == "Invalid" and s, 60, "Invalid"
    )
    assert invalid["reason"] == "Rejected"
    assert invalid["message"].startswith(f"VirtualServer {namespace}/cafe was rejected with error")
    assert served_by(f, "vs.k8s.test", "/") == "404"
    put(kube, VirtualServer, _vs(namespace, "tea"))
    wait_until(lambda: _status(kube, namespace) == want, 60, "Valid again")
    # Deleted and created again: the new object gets its status too.
    kube.delete(VirtualServer, "cafe", namespace=namespace)
    wait_until(lambda: served_by(f, "vs.k8s.test", "/") == "404", 60, "the deletion")
    put(kube, VirtualServer, _vs(namespace, "tea"))
    wait_until(lambda: _status(kube, namespace) == want, 60, "status of the new object")
    assert served_by(f, "vs.k8s.test", "/") == "tea"
    assert f.reloads() == 1
