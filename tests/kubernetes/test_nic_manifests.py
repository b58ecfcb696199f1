"""NIC's manifest install (tests/kubernetes/nic-manifests, only the image changed) on a real
API server: ferryman runs with the Deployment's args and env under NIC's ServiceAccount
and RBAC, and serves NIC's cafe example, as NIC would."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from lightkube import Client, codecs
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Namespace, Service
from lightkube.resources.networking_v1 import Ingress

from testkit.apiserver import APIServer, apply, install_crds, wait_until
from testkit.harness import Ferryman, tls_secret
from testkit.kubernetes_mode import _events, _status
from testkit.netns import BackendHost, RemoteBackend
from testkit.nic_fixtures import VENDOR
from testkit.nic_resources import NIC_CRDS, VirtualServer, status
from testkit.service_account import token_kubeconfig

MANIFESTS = Path(__file__).with_name("nic-manifests")
# In the order NIC's installation page applies them (the namespace first).
FILES = ("ns-and-sa.yaml", "rbac.yaml", "nginx-config.yaml", "ingress-class.yaml")
FILES += ("nginx-ingress.yaml", "loadbalancer.yaml")
EXAMPLES = VENDOR / "nic-examples-v5.5.4"
COMPLETE_EXAMPLE = EXAMPLES / "ingress-resources" / "complete-example"
BASIC_CONFIGURATION = EXAMPLES / "custom-resources" / "basic-configuration"
NAMESPACE = "nginx-ingress"  # NIC's, fixed in its manifests
APPS = "nic-cafe"  # where the example goes (NIC's README: the current namespace)


def _docs() -> list[dict[str, Any]]:
    return [d for f in FILES for d in yaml.safe_load_all((MANIFESTS / f).read_text()) if d]


def _container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


def _expanded(arg: str, env: dict[str, str]) -> str:
    """``$(VAR)`` as the kubelet expands it in args from the container's env
    (``$$`` escapes; an unknown name stays as written)."""
    return re.sub(
        r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
        lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)),
        arg,
    )


def _pod_env(container: dict[str, Any], pod_name: str) -> dict[str, str]:
    """The container's downward-API env, as the kubelet fills it for this pod."""
    fields = {"metadata.namespace": NAMESPACE, "metadata.name": pod_name}
    return {e["name"]: fields[e["valueFrom"]["fieldRef"]["fieldPath"]] for e in container["env"]}


def _endpoints(service: str, backend: RemoteBackend) -> dict[str, Any]:
    """What the EndpointSlice controller would list for the Service's pods: here an
    echo backend, on the port the Service's ``http`` port targets."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{service}-pods",
            "namespace": APPS,
            "labels": {"kubernetes.io/service-name": service},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": backend.port, "protocol": "TCP"}],
        "endpoints": [{"addresses": [backend.address], "conditions": {"ready": True}}],
    }


def _cafe_vs() -> dict[str, Any]:
    (vs,) = yaml.safe_load_all((BASIC_CONFIGURATION / "cafe-virtual-server.yaml").read_text())
    vs["metadata"]["namespace"] = APPS
    return dict(vs)


def _apply_cafe(kube: Client, backends: BackendHost) -> None:
    """NIC's complete example as its README applies it (cafe.yaml, the tls-secret that
    ``make secrets`` makes, cafe-ingress.yaml), in a namespace of its own; no
    controller-manager runs here, so each Service's endpoints are an echo backend
    named for the drink."""
    for name in ("cafe.yaml", "cafe-ingress.yaml"):
        for obj in codecs.load_all_yaml((COMPLETE_EXAMPLE / name).read_text()):
            doc = obj.to_dict()
            doc["metadata"]["namespace"] = APPS
            apply(kube, doc)
            if doc["kind"] == "Service":
                service = doc["metadata"]["name"]
                drink = service.removesuffix("-svc")
                apply(kube, _endpoints(service, backends.start(drink)))
    apply(kube, tls_secret("tls-secret", ["cafe.example.com"], namespace=APPS))


def _drink(f: Ferryman, drink: str) -> str | None:
    """Who answered https://cafe.example.com/<drink> (the example's README's curl);
    None when no one does (no host served: the handshake is refused)."""
    try:
        return f.get("cafe.example.com", f"/{drink}", https=True).served_by
    except httpx.HTTPError:
        return None


@pytest.fixture
def apiserver(
    apiserver_binary: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[APIServer]:
    """An API server of its own: NIC's manifests make cluster-wide objects
    (IngressClass nginx, NIC's ClusterRole) that other tests on the session's
    make differently (test_helm's NIC values: class nginx for ferryman's
    controller, immutable)."""
    server = APIServer(apiserver_binary, tmp_path_factory.mktemp("nic-apiserver"))
    server.start()
    yield server
    server.stop()


def test_nics_manifests_bring_up_ferryman_serving_the_cafe_example(
    tmp_path: Path, apiserver: APIServer, kube: Client, backends: BackendHost
) -> None:
    """ferryman under NIC's RBAC with NIC's args (class nginx, NIC's default) serves the
    cafe Ingress over HTTPS with NIC's redirect on HTTP and reports the Service's
    address in its status with an Event; then, the Ingress deleted, the cafe
    VirtualServer of basic-configuration (status Valid, with the address). Nothing
    it did was forbidden; what NIC's RBAC does not grant is said once."""
    install_crds(kube, *NIC_CRDS)
    docs = _docs()
    container = _container(docs)
    assert container["image"] == "ferryman:0.1.0"
    assert container["readinessProbe"]["httpGet"]["path"] == "/nginx-ready"
    for doc in docs:
        apply(kube, doc)
    assert kube.get(Deployment, "nginx-ingress", namespace=NAMESPACE)
    # What a cloud's load balancer would write on NIC's Service.
    kube.patch(
        Service.Status,
        "nginx-ingress",
        {"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.50"}]}}},
        namespace=NAMESPACE,
    )
    kube.create(Namespace(metadata=ObjectMeta(name=APPS)))
    _apply_cafe(kube, backends)

    # The container as the kubelet starts it: env from the downward API, $(VAR)
    # expanded in the args, the token of the pod's ServiceAccount.
    env = _pod_env(container, "nginx-ingress-5d8f9c7b6-x2k4q")
    pod = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    f = Ferryman(
        tmp_path / "ferryman",
        nic_flags=True,
        extra_args=[_expanded(a, env) for a in container["args"]],
        kubeconfig=token_kubeconfig(
            apiserver, kube, NAMESPACE, pod["serviceAccountName"], tmp_path / "sa.kubeconfig"
        ),
        env=env,
    )
    f.start()
    try:
        for drink in ("coffee", "tea"):
            assert wait_until(functools.partial(_drink, f, drink), 60, drink) == drink
            plain = f.get("cafe.example.com", f"/{drink}")
            assert plain.status == 301
            assert plain.headers["location"].startswith("https://cafe.example.com")
        wait_until(lambda: _status(kube, APPS, "cafe-ingress") == ["192.0.2.50"], 60, "status")
        wait_until(lambda: _events(kube, APPS, "cafe-ingress"), 60, "an Event")

        # The same cafe as a VirtualServer (its host is the Ingress's: one owner).
        kube.delete(Ingress, "cafe-ingress", namespace=APPS)
        wait_until(lambda: _drink(f, "coffee") is None, 60, "the Ingress gone")
        wait_until(lambda: kube.create(VirtualServer(_cafe_vs())), 60, "the VirtualServer")
        for drink in ("coffee", "tea"):
            assert wait_until(functools.partial(_drink, f, drink), 60, drink) == drink

        def vs_status() -> dict[str, Any]:
            return status(kube, VirtualServer, "cafe", APPS)

        assert wait_until(lambda: vs_status().get("state"), 60, "VS status") == "Valid"
        assert vs_status()["externalEndpoints"][0]["ip"] == "192.0.2.50"
        wait_until(lambda: _events(kube, APPS, "cafe"), 60, "the VirtualServer's Event")
        logs = f.logs()
        assert "forbidden" not in logs.lower()
        assert logs.count("RBAC grants list but not watch") == 1  # IngressClasses
    finally:
        assert f.stop() == 0
