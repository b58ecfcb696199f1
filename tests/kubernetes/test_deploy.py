"""deploy/ applies to a real API server, and its RBAC is enough for ferryman."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import yaml
from lightkube import Client, codecs
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.admissionregistration_v1 import MutatingWebhookConfiguration
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Namespace, Secret

from ferryman.resources.readiness_gate import INJECT_ENABLED, INJECT_LABEL
from testkit.apiserver import APIServer, apply, wait_until
from testkit.harness import (
    Ferryman,
    free_port,
    ingress,
    path,
    rule,
    served_by,
    service_with_backends,
)
from testkit.kubernetes_mode import _events, _status
from testkit.netns import BackendHost
from testkit.service_account import token_kubeconfig

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


@contextlib.contextmanager
def _deployed(kube: Client) -> Iterator[None]:
    """deploy/ applied; its MutatingWebhookConfiguration deleted after: it is
    cluster-wide and fails closed, so later tests' opted-in namespaces would
    call a webhook nobody serves and have every pod refused."""
    ordered = sorted(DEPLOY.glob("*.yaml"), key=lambda p: p.name != "namespace.yaml")
    try:
        for f in ordered:
            for obj in codecs.load_all_yaml(f.read_text()):
                apply(kube, obj.to_dict())
        yield
    finally:
        kube.delete(MutatingWebhookConfiguration, "ferryman-readiness-gates")


def _token_kubeconfig(apiserver: APIServer, kube: Client, out: Path) -> str:
    return token_kubeconfig(apiserver, kube, "ferryman", "ferryman", out)


def _webhook_args() -> list[str]:
    """The Deployment's readiness gate webhook flags, on a free port."""
    deployment = yaml.safe_load((DEPLOY / "deployment.yaml").read_text())
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    webhook = [a for a in args if a.startswith("--readiness-gate-webhook-")]
    assert "--readiness-gate-webhook-port=8443" in webhook
    return [a for a in webhook if "-port=" not in a] + [
        f"--readiness-gate-webhook-port={free_port()}"
    ]


def test_deploy_manifests_apply_and_rbac_suffices(
    tmp_path: Path, apiserver: APIServer, kube: Client, backends: BackendHost
) -> None:
    with _deployed(kube):
        _run_with_deploy_rbac(tmp_path, apiserver, kube, backends)


def _run_with_deploy_rbac(
    tmp_path: Path, apiserver: APIServer, kube: Client, backends: BackendHost
) -> None:
    deployment = kube.get(Deployment, "ferryman", namespace="ferryman")
    assert deployment.spec is not None and deployment.spec.replicas == 2

    # Opted in to readiness gates (deploy/ turns them on): pods are watched there.
    labels = {INJECT_LABEL: INJECT_ENABLED}
    kube.create(Namespace(metadata=ObjectMeta(name="rbac-app", labels=labels)))
    apply(kube, *service_with_backends("app", [backends.start("pod")], namespace="rbac-app"))
    apply(kube, ingress("web", [rule("rbac.test", path("/", "app"))], namespace="rbac-app"))
    tls = ["--report-ingress-status", "--ingress-address", "192.0.2.30", "--readiness-gates"]
    # configmap.yaml, read through rbac.yaml's Role (start-up waits for its list).
    tls += ["--nginx-configmaps", "ferryman/nginx-config"]
    f = Ferryman(
        tmp_path / "sa",
        extra_args=tls + _webhook_args(),
        kubeconfig=_token_kubeconfig(apiserver, kube, tmp_path / "sa.kubeconfig"),
        env={"POD_NAME": "ferryman-sa", "POD_NAMESPACE": "ferryman"},
    )
    f.start()
    try:
        assert served_by(f, "rbac.test", "/") == "pod"
        wait_until(lambda: _status(kube, "rbac-app", "web") == ["192.0.2.30"], 60, "status")
        wait_until(lambda: _events(kube, "rbac-app", "web"), 60, "event")
        lease = kube.get(Lease, "ferryman-leader-election", namespace="ferryman")
        assert lease.spec is not None and lease.spec.holderIdentity == "ferryman-sa"
        # Its readiness-gate report: a Lease of its own, created and renewed.
        report = "ferryman-report.ferryman-leader-election.ferryman-sa"
        wait_until(lambda: kube.get(Lease, report, namespace="ferryman"), 60, "report")

        # The webhook's certificate made into its Secret, and its CA trusted.
        def ca_bundles() -> list[str | None]:
            config = kube.get(MutatingWebhookConfiguration, "ferryman-readiness-gates")
            return [w.clientConfig.caBundle for w in config.webhooks or []]

        secret = wait_until(
            lambda: kube.get(Secret, "ferryman-webhook-cert", namespace="ferryman"), 60, "Secret"
        )
        assert secret.data is not None
        wait_until(lambda: ca_bundles() == [secret.data["ca.crt"]], 60, "caBundle")
        assert "forbidden" not in f.logs().lower()
    finally:
        assert f.stop() == 0


def test_a_disruption_budget_keeps_a_webhook_replica_through_voluntary_disruptions(
    apiserver: APIServer, kube: Client
) -> None:
    """With failurePolicy Fail, no replica answering means no pod of an opted-in
    namespace is created: a drain must not take both replicas at once."""
    from lightkube.resources.policy_v1 import PodDisruptionBudget

    with _deployed(kube):
        pdb = kube.get(PodDisruptionBudget, "ferryman", namespace="ferryman")
        deployment = next(
            d for d in yaml.safe_load_all((DEPLOY / "deployment.yaml").read_text())
            if d["kind"] == "Deployment"
        )  # fmt: skip
        assert pdb.spec is not None and pdb.spec.selector is not None
        assert pdb.spec.selector.matchLabels == deployment["spec"]["selector"]["matchLabels"]
        assert pdb.spec.minAvailable == 1
