"""NIC's status.externalEndpoints on VirtualServers and VirtualServerRoutes, on a
real kube-apiserver: the addresses Ingress status gets (--external-service: its
LoadBalancer ingress; --ingress-address: the given ones), with the Service's
HTTP and HTTPS ports as NIC reports them, following the Service's changes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lightkube import Client
from lightkube.resources.core_v1 import ServiceStatus
from lightkube.types import PatchType

from testkit.apiserver import apply, wait_until
from testkit.harness import Ferryman, served_by, service_with_backends
from testkit.netns import BackendHost
from testkit.nic_resources import VirtualServer, VirtualServerRoute, put, status
from testkit.vsr_mode import HOST, _vs, _vsr


def _endpoints(kube: Client, resource: Any, namespace: str, name: str) -> Any:
    return status(kube, resource, name, namespace).get("externalEndpoints")


def _wait_endpoints(kube: Client, namespace: str, want: Any, timeout: float, what: str) -> None:
    """Both the VirtualServer "cafe" and its VirtualServerRoute "tea" report ``want``."""
    for resource, name in ((VirtualServer, "cafe"), (VirtualServerRoute, "tea")):
        wait_until(
            lambda r=resource, n=name: _endpoints(kube, r, namespace, n) == want,
            timeout,
            f"{name}'s {what}",
        )


def _lb(kube: Client, namespace: str, *addresses: dict[str, str]) -> None:
    kube.patch(
        ServiceStatus,
        "ferryman",
        {"status": {"loadBalancer": {"ingress": list(addresses)}}},
        namespace=namespace,
        patch_type=PatchType.MERGE,
    )


def test_external_endpoints_from_the_external_service(
    crds: Client, namespace: str, backends: BackendHost,
    start_ferryman: Callable[..., Ferryman],
) -> None:  # fmt: skip
    kube = crds
    own = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "ferryman", "namespace": namespace},
        "spec": {
            "type": "LoadBalancer",
            "ports": [
                {"name": "http", "port": 80, "targetPort": 80},
                {"name": "https", "port": 443, "targetPort": "https"},
                {"name": "metrics", "port": 9113, "targetPort": 9113},
            ],
        },
    }
    apply(kube, own)
    _lb(kube, namespace, {"ip": "192.0.2.7"})
    apply(kube, *service_with_backends("tea", [backends.start("tea")], namespace=namespace))
    put(kube, VirtualServer, _vs(namespace))
    put(kube, VirtualServerRoute, _vsr(namespace, "tea", "tea"))
    f = start_ferryman("ferryman-ext", "--external-service", f"{namespace}/ferryman")
    assert served_by(f, HOST, "/tea") == "tea"
    want = [{"ip": "192.0.2.7", "ports": "[80,443]"}]
    _wait_endpoints(kube, namespace, want, 60, "externalEndpoints")
    # The Service's address changes (ferryman reads it every 10 s): both follow.
    _lb(kube, namespace, {"hostname": "lb.example.com"})
    want = [{"hostname": "lb.example.com", "ports": "[80,443]"}]
    _wait_endpoints(kube, namespace, want, 60, "new externalEndpoints")
    state = kube.get(VirtualServer, "cafe", namespace=namespace)["status"]["state"]
    assert state == "Valid"
    assert f.reloads() == 1


def test_external_endpoints_from_ingress_addresses(
    crds: Client, namespace: str, backends: BackendHost,
    start_ferryman: Callable[..., Ferryman],
) -> None:  # fmt: skip
    """--ingress-address: NIC's external-status-address, ports from no Service: ""."""
    kube = crds
    apply(kube, *service_with_backends("tea", [backends.start("tea")], namespace=namespace))
    put(kube, VirtualServer, _vs(namespace))
    put(kube, VirtualServerRoute, _vsr(namespace, "tea", "tea"))
    start_ferryman("ferryman-ext2", "--ingress-address", "192.0.2.30")
    want = [{"ip": "192.0.2.30", "ports": ""}]
    _wait_endpoints(kube, namespace, want, 60, "externalEndpoints")


def test_external_status_address_from_the_configmap_overrides_the_flags(
    crds: Client, namespace: str, backends: BackendHost,
    start_ferryman: Callable[..., Ferryman],
) -> None:  # fmt: skip
    """NIC's ConfigMap key external-status-address: the addresses status shows,
    over --ingress-address; an edit is followed, removing it falls back."""
    kube = crds
    apply(kube, *service_with_backends("tea", [backends.start("tea")], namespace=namespace))
    put(kube, VirtualServer, _vs(namespace))
    put(kube, VirtualServerRoute, _vsr(namespace, "tea", "tea"))
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "nginx-config", "namespace": namespace},
        "data": {"external-status-address": "192.0.2.40, lb.example.com"},
    }
    apply(kube, config)
    start_ferryman(
        "ferryman-ext3",
        "--ingress-address", "192.0.2.30",
        "--nginx-configmaps", f"{namespace}/nginx-config",
    )  # fmt: skip
    want = [{"ip": "192.0.2.40", "ports": ""}, {"hostname": "lb.example.com", "ports": ""}]
    _wait_endpoints(kube, namespace, want, 60, "the ConfigMap's addresses")
    config["data"] = {"external-status-address": "192.0.2.41"}
    apply(kube, config)
    _wait_endpoints(kube, namespace, [{"ip": "192.0.2.41", "ports": ""}], 60, "the edit")
    config["data"] = {}
    apply(kube, config)
    _wait_endpoints(kube, namespace, [{"ip": "192.0.2.30", "ports": ""}], 60, "the flag's")
