"""NIC's custom resources as the Kubernetes-mode tests use them: their lightkube
classes (registered once, so ``apply()`` can decode any of their manifests),
the CRD files that define them, and the two ways the tests touch them through
the API (create-or-update a spec; read the status ferryman wrote)."""

from __future__ import annotations

from typing import Any

from lightkube import ApiError, Client
from lightkube.generic_resource import create_namespaced_resource
from lightkube.types import PatchType

from testkit.nic_fixtures import ROOT

VirtualServer = create_namespaced_resource("k8s.nginx.org", "v1", "VirtualServer", "virtualservers")
VirtualServerRoute = create_namespaced_resource(
    "k8s.nginx.org", "v1", "VirtualServerRoute", "virtualserverroutes"
)
Policy = create_namespaced_resource("k8s.nginx.org", "v1", "Policy", "policies")
TransportServer = create_namespaced_resource(
    "k8s.nginx.org", "v1", "TransportServer", "transportservers"
)
GlobalConfiguration = create_namespaced_resource(
    "k8s.nginx.org", "v1", "GlobalConfiguration", "globalconfigurations"
)
NIC_CRDS = sorted((ROOT / "deploy" / "crds").glob("k8s.nginx.org_*.yaml"))


def put(kube: Client, resource: Any, doc: dict[str, Any]) -> None:
    """Create ``doc``, or (it exists) merge its spec into the stored object: a
    user's ``kubectl apply`` as far as ferryman can tell."""
    md = doc["metadata"]
    try:
        kube.create(resource(doc))
    except ApiError as e:
        if e.status.code != 409:
            raise
        spec = {"spec": doc["spec"]}
        kube.patch(
            resource, md["name"], spec, namespace=md["namespace"], patch_type=PatchType.MERGE
        )


def status(kube: Client, resource: Any, name: str, namespace: str) -> dict[str, Any]:
    """The object's status as stored ({} before ferryman writes one)."""
    return dict(kube.get(resource, name, namespace=namespace).get("status") or {})
