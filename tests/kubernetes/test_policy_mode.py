"""Policies in Kubernetes mode on a real kube-apiserver with deploy/crds: ferryman
writes a Policy's own status as NIC does (Valid/AddedOrUpdated, Invalid/Rejected),
reads the policy's Secret (an informer per Secret type), and the VirtualServer
using an invalid Policy is Warning with NIC's message while that route answers 500."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from lightkube import Client
from lightkube.types import PatchType

from testkit.apiserver import apply, wait_until
from testkit.harness import Ferryman, served_by, service_with_backends
from testkit.netns import BackendHost
from testkit.nic_resources import Policy, VirtualServer, status


def _policy(namespace: str, **spec: Any) -> dict[str, Any]:
    md = {"name": "auth", "namespace": namespace}
    return {"apiVersion": "k8s.nginx.org/v1", "kind": "Policy", "metadata": md, "spec": spec}


def _basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_policy_status_and_its_secret(
    crds: Client, namespace: str, backends: BackendHost,
    start_ferryman: Callable[..., Ferryman],
) -> None:  # fmt: skip
    kube = crds
    apply(kube, *service_with_backends("tea", [backends.start("tea")], namespace=namespace))
    htpasswd = base64.b64encode(b"foo:{PLAIN}bar\n").decode()
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "users", "namespace": namespace},
        "type": "nginx.org/htpasswd",
        "data": {"htpasswd": htpasswd},
    }
    vs = {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": {"name": "cafe", "namespace": namespace},
        "spec": {
            "host": "pol.k8s.test",
            "upstreams": [{"name": "up", "service": "tea", "port": 80}],
            "routes": [{"path": "/", "action": {"pass": "up"}, "policies": [{"name": "auth"}]}],
        },
    }
    apply(kube, secret, _policy(namespace, basicAuth={"secret": "users", "realm": "k8s"}), vs)
    f = start_ferryman("ferryman-pol")
    assert f.get("pol.k8s.test", "/").status == 401
    assert served_by(f, "pol.k8s.test", "/", headers=_basic("foo", "bar")) == "tea"
    valid = {
        "state": "Valid",
        "reason": "AddedOrUpdated",
        "message": f"Policy {namespace}/auth was added or updated",
    }
    wait_until(lambda: status(kube, Policy, "auth", namespace) == valid, 60, "Policy Valid")

    # Invalid: its status says why; the route answers 500 and the VirtualServer warns.
    patch = {"spec": {"basicAuth": {"secret": None}}}
    kube.patch(Policy, "auth", patch, namespace=namespace, patch_type=PatchType.MERGE)
    invalid = wait_until(
        lambda: (s := status(kube, Policy, "auth", namespace)).get("state") == "Invalid" and s,
        60,
        "Policy Invalid",
    )
    assert invalid["reason"] == "Rejected"
    assert invalid["message"] == (
        f"Policy {namespace}/auth is invalid and was rejected: spec.basicAuth.secret: "
        "Required value"
    )
    wait_until(lambda: f.get("pol.k8s.test", "/").status == 500, 60, "500")
    warning = {
        "state": "Warning",
        "reason": "AddedOrUpdatedWithWarning",
        "message": f"Configuration for {namespace}/cafe was added or updated with warning(s): "
        f"Policy {namespace}/auth is missing or invalid",
    }
    wait_until(lambda: status(kube, VirtualServer, "cafe", namespace) == warning, 60, "Warning")
    assert f.reloads() == 1
