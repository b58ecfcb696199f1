"""VirtualServerRoutes in Kubernetes mode on a real kube-apiserver with deploy/crds:
the informer delivers them, a VirtualServer's delegated path follows them with no
reload, and ferryman writes NIC's VirtualServerRoute status (state, reason,
message, referencedBy) through the status subresource."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lightkube import Client

from testkit.apiserver import apply, wait_until
from testkit.harness import Ferryman, served_by, service_with_backends
from testkit.netns import BackendHost
from testkit.nic_resources import VirtualServer, VirtualServerRoute, put, status
from testkit.vsr_mode import HOST, _vs, _vsr


def _status(kube: Client, namespace: str, name: str) -> dict[str, Any]:
    return status(kube, VirtualServerRoute, name, namespace)


def test_virtual_server_route_is_served_and_reports_status(
    crds: Client, namespace: str, backends: BackendHost,
    start_ferryman: Callable[..., Ferryman],
) -> None:  # fmt: skip
    kube = crds
    apply(kube, *service_with_backends("tea", [backends.start("tea")], namespace=namespace))
    apply(kube, *service_with_backends("green", [backends.start("green")], namespace=namespace))
    put(kube, VirtualServer, _vs(namespace))
    put(kube, VirtualServerRoute, _vsr(namespace, "tea", "tea"))
    put(kube, VirtualServerRoute, _vsr(namespace, "orphan", "tea", host="nobody.k8s.test"))
    f = start_ferryman("ferryman-vsr")
    assert served_by(f, HOST, "/tea") == "tea"
    valid = {
        "state": "Valid",
        "reason": "AddedOrUpdated",
        "message": f"Configuration for {namespace}/tea was added or updated",
        "referencedBy": f"{namespace}/cafe",
    }
    wait_until(lambda: _status(kube, namespace, "tea") == valid, 60, "status Valid")
    orphan = {
        "state": "Warning",
        "reason": "NoVirtualServerFound",
        "message": "VirtualServer is invalid or doesn't exist",
        "referencedBy": "",
    }
    wait_until(lambda: _status(kube, namespace, "orphan") == orphan, 60, "orphan status")

    put(kube, VirtualServerRoute, _vsr(namespace, "tea", "green"))
    wait_until(lambda: served_by(f, HOST, "/tea") == "green", 60, "the update")
    # Another host: the VS no longer serves it, and says why.
    put(kube, VirtualServerRoute, _vsr(namespace, "tea", "green", host="other.k8s.test"))
    wait_until(lambda: served_by(f, HOST, "/tea") == "404", 60, "the host check")
    moved = wait_until(
        lambda: (
            (s := _status(kube, namespace, "tea")).get("reason") == "NoVirtualServerFound" and s
        ),
        60,
        "the VSR's status",
    )
    assert (moved["state"], moved["referencedBy"]) == ("Warning", "")
    # The VirtualServer's status is another write of the same flush, in no set order.
    vs_status = wait_until(
        lambda: (
            (s := status(kube, VirtualServer, "cafe", namespace)).get("state") == "Warning" and s
        ),
        60,
        "the VirtualServer's Warning status",
    )
    assert vs_status["message"].endswith(
        f"VirtualServerRoute {namespace}/tea is invalid: spec.host: Invalid value: "
        f"\"other.k8s.test\": must be equal to '{HOST}'"
    )
    kube.delete(VirtualServerRoute, "tea", namespace=namespace)
    put(kube, VirtualServerRoute, _vsr(namespace, "tea", "tea"))
    wait_until(lambda: _status(kube, namespace, "tea") == valid, 60, "status of the new object")
    assert served_by(f, HOST, "/tea") == "tea"
    assert f.reloads() == 1
