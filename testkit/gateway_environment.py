"""What the Gateway API conformance suite needs besides ferryman: its binaries
(tools/conformance/build.sh: the suite, echo-basic and the release's CRDs) and
pods that serve as the suite's images do (the test kubelet runs echo-basic for
``gateway-api/echo-basic`` images and an idle process for any other image).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from lightkube import ApiError, Client
from lightkube.resources.core_v1 import Pod, Secret

from testkit.apiserver import apply, wait_until
from testkit.harness import tls_secret
from testkit.kubelet import Command, Kubelet

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Conformance:
    suite: Path
    echo_basic: Path
    crds: Path

    def command(self) -> Command:
        """The test kubelet's command for a pod of the suite's manifests."""

        def run(pod: dict[str, Any], ip: str, ports: list[int]) -> list[str]:
            image = pod["spec"]["containers"][0].get("image", "")
            binary = str(self.echo_basic) if "/gateway-api/echo-basic:" in image else "-"
            return [sys.executable, "-m", "testkit.echo_pod", binary, ip, *map(str, ports)]

        return run

    def crd_files(self) -> list[Path]:
        """The standard channel's CRDs (not its ValidatingAdmissionPolicy, which
        only guards upgrades from older CRDs)."""
        return sorted(p for p in self.crds.glob("gateway.networking.k8s.io_*.yaml")
                      if "_vap_" not in p.name)  # fmt: skip


def build() -> Conformance:
    out = subprocess.run(
        [str(ROOT / "tools" / "conformance" / "build.sh")],
        check=True, capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    return Conformance(Path(out[-3]), Path(out[-2]), Path(out[-1]))


# The namespaces of the suite's base manifests (v1.6.3).
NAMESPACES = (
    "gateway-conformance-infra",
    "gateway-conformance-app-backend",
    "gateway-conformance-web-backend",
)


GATEWAY_API = "gateway.networking.k8s.io/"


def base_manifests(conformance: Conformance) -> Path:
    return conformance.crds.parent / "base-manifests.yaml"


def start_base_pods(
    kube: Client, conformance: Conformance, kubelet: Kubelet, suite_secrets: bool = False
) -> list[Pod]:
    """Applies the suite's base manifests but the Gateways (the suite applies
    those with its class) and returns their pods once every one is Ready: a
    failure here is the environment's, not ferryman's (the suite re-applies
    them in place).

    The Secrets some pods mount (tls-backend's certificate) are the suite's:
    it makes them at its start with a CA of its own, which its TLS tests
    verify the backends by. With ``suite_secrets`` they are left to it: the
    pods mounting them are not waited for (they wait for the Secret, as on a
    cluster), and any made before (by this function without the flag) are
    deleted with those pods, so that each serves the suite's certificate.
    Without it, stand-ins are made and every pod is waited for."""
    docs = [d for d in yaml.safe_load_all(base_manifests(conformance).read_text()) if d]
    docs = [d for d in docs if not d["apiVersion"].startswith(GATEWAY_API)]
    apply(kube, *[d for d in docs if d["kind"] == "Namespace"])
    secrets = _volume_secrets(docs)
    if suite_secrets:
        _forget(kube, secrets)
        apply(kube, *[d for d in docs if d["kind"] != "Namespace"])
    else:
        apply(kube, *secrets, *[d for d in docs if d["kind"] != "Namespace"])
    expected = sum(
        d["spec"].get("replicas", 1)
        for d in docs
        if d["kind"] == "Deployment" and not (suite_secrets and _mounts_secrets(d))
    )

    waited = {
        d["metadata"]["name"]
        for d in docs
        if d["kind"] == "Deployment" and not (suite_secrets and _mounts_secrets(d))
    }

    def ready() -> list[Pod]:
        pods = [p for p in _pods(kube) if _deployment(p) in waited]
        return pods if len(pods) == expected and all(map(_ready, pods)) else []

    try:
        pods: list[Pod] = wait_until(ready, 300, f"{expected} Ready base pods")
    except AssertionError as e:
        states = {
            p.metadata.name: [(c.type, c.status) for c in p.status.conditions or []]
            for p in _pods(kube)
            if not _ready(p)
        }
        raise AssertionError(f"{e}; not ready: {states}; kubelet: {kubelet.errors[-5:]}") from None
    return pods


def _volume_secrets(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Secrets base pods mount: the suite creates them only after the
    Deployments, and the test kubelet starts a pod once its volumes exist."""
    wanted = {
        (d["metadata"]["namespace"], v["secret"]["secretName"])
        for d in docs
        if d["kind"] == "Deployment"
        for v in d["spec"]["template"]["spec"].get("volumes") or []
        if "secret" in v
    }
    return [tls_secret(name, ["abc.example.com"], namespace=ns) for ns, name in sorted(wanted)]


def _mounts_secrets(deployment: dict[str, Any]) -> bool:
    volumes = deployment["spec"]["template"]["spec"].get("volumes") or []
    return any("secret" in v for v in volumes)


def _deployment(pod: Pod) -> str:
    """The Deployment a pod belongs to (its ReplicaSet's name less the hash)."""
    owners = pod.metadata.ownerReferences or []
    replica_set = next((o.name for o in owners if o.kind == "ReplicaSet"), "")
    return replica_set.rsplit("-", 1)[0]


def _forget(kube: Client, secrets: list[dict[str, Any]]) -> None:
    """Deletes these Secrets and the pods mounting them (their Deployments
    make new ones, which wait for the suite's Secret)."""
    for secret in secrets:
        namespace, name = secret["metadata"]["namespace"], secret["metadata"]["name"]
        try:
            kube.delete(Secret, name, namespace=namespace)
        except ApiError as e:
            if e.status.code != 404:
                raise
            continue
        for pod in kube.list(Pod, namespace=namespace):
            if any(v.secret and v.secret.secretName == name for v in pod.spec.volumes or []):
                kube.delete(Pod, pod.metadata.name, namespace=namespace, grace_period=0)


def _pods(kube: Client) -> list[Pod]:
    return [p for ns in NAMESPACES for p in kube.list(Pod, namespace=ns)]


def _ready(pod: Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])
