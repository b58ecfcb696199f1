"""charts/ferryman: lints, renders args the real CLI accepts, applies to a real API server,
and its RBAC and args run the real controller under the chart's ServiceAccount."""

from __future__ import annotations

import argparse
import base64
import contextlib
import copy
import itertools
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client, KubeConfig, codecs
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.admissionregistration_v1 import MutatingWebhookConfiguration
from lightkube.resources.apps_v1 import DaemonSet, Deployment
from lightkube.resources.autoscaling_v2 import HorizontalPodAutoscaler
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Namespace, Pod, Secret, Service, ServiceAccount
from lightkube.resources.events_v1 import Event
from lightkube.resources.networking_v1 import Ingress, IngressClass
from lightkube.resources.rbac_authorization_v1 import (
    ClusterRole,
    ClusterRoleBinding,
    Role,
    RoleBinding,
)
from lightkube.types import PatchType

from ferryman.app import cli
from testkit.apiserver import APIServer, apply, install_crds, wait_until
from testkit.harness import Ferryman, free_port, ingress, path, rule
from testkit.machine_controller import CRD, Machine
from testkit.nic_resources import (
    NIC_CRDS,
    TransportServer,
    VirtualServer,
    VirtualServerRoute,
    status,
)
from testkit.service_account import token_kubeconfig

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "ferryman"
BUILD = ROOT / "tools" / "helm" / "build.sh"
RELEASE = "edge"  # full name edge-ferryman: no clash with deploy/'s "ferryman" objects

# `ferryman run` flags a chart has no value for: the image fixes them, or they are
# not Kubernetes mode (--manifests), or the in-cluster account is what is used.
NOT_IN_CHART = {"-h", "--help", "--manifests", "--kubeconfig", "--nginx-binary"}
NOT_IN_CHART |= {"--nginx-modules-dir", "--data-plane-binary"}
# Retired with Angie's classic flavour; accepted so old deployments start.
NOT_IN_CHART |= {"--angie-dns-port"}
# ingress-nginx's name for --enable-tls-passthrough, which the chart passes
# (controller.enableTLSPassthrough).
NOT_IN_CHART |= {"--enable-ssl-passthrough"}

# Every value that turns a flag on or changes how it is rendered.
EVERYTHING: dict[str, Any] = {
    "controller.ingressNginxConfigMap": "ingress-nginx/ingress-nginx-controller",
    "controller.enableCertManager": True,
    "controller.logFormat": "json-unix-ms",
    "controller.logLevel": "trace",
    "controller.watchNamespace": "a, b",
    "controller.readinessGates.enable": True,
    "controller.nginxReloadTimeout": 2500,
    "controller.defaultTLS.secret": "a/default-tls",
    # cert and key: the chart's own Secret, passed by name.
    "controller.wildcardTLS.cert": "Y2VydA==",
    "controller.wildcardTLS.key": "a2V5",
    "controller.workerProcesses": 4,
    "controller.workerShutdownTimeout": "30s",
    "controller.shutdownGracePeriod": 2.5,
    "controller.recordsMemorySize": "256m",
    "controller.maxRecordBytes": 100000,
    "controller.allowedHostSuffixes": {"team-a": ["a.example.com", "shop.test"], "admin": ["*"]},
    "controller.dataPlane": "angie",
    "controller.reportIngressStatus.externalService": "other/lb",
    "controller.reportIngressStatus.ingressAddress": ["192.0.2.1", "lb.example.com"],
    "controller.reportIngressStatus.leaderElectionLockName": "my-lock",
    "controller.leaderElection.leaseDuration": 20,
    "controller.leaderElection.renewDeadline": 10,
    "controller.leaderElection.retryPeriod": 2,
    "controller.machineLifecycleHooks.mode": "openshift",
    "controller.machineLifecycleHooks.drainTimeout": 90,
    "controller.machineLifecycleHooks.inFlightTimeout": 30,
    "controller.nginxStatus.enable": True,
    "controller.nginxStatus.port": 8080,
    "controller.nginxStatus.allowCidrs": "10.0.0.0/8, ::1/128",
    "controller.healthStatus": True,
    "controller.healthStatusURI": "/healthz",
    "controller.enableLatencyMetrics": True,
    "controller.computeFullForwardedFor": False,
    "controller.strictRequestPaths": True,
    "controller.globalConfiguration.customName": "ingress/listeners",
    "controller.enableTLSPassthrough": True,
    "controller.tlsPassthroughPort": 8443,
    "controller.gatewayAPI.enable": True,
    "controller.gatewayAPI.controllerName": "example.com/gateway",
    "controller.gatewayAPI.addresses": "10.0.0.10-10.0.0.20",
    "controller.defaultHTTPListenerPort": 8000,
    "controller.containerPort.http": 8000,
    "controller.defaultHTTPSListenerPort": 8443,
    "controller.containerPort.https": 8443,
    "controller.readyStatus.port": 8082,
    "prometheus.port": 9100,
    "controller.readinessGates.timeout": 120,
    "readinessGateWebhook.port": 9443,
    "readinessGateWebhook.failurePolicy": "Ignore",
    "readinessGateWebhook.timeoutSeconds": 7,
    "readinessGateWebhook.certSecret": "my-cert",
    "controller.config.name": "my-config",
    "controller.config.entries": {"worker-processes": 2, "http2": True, "log-format": "$a 'b'"},
}

_names = itertools.count()


@pytest.fixture(scope="session")
def helm_binary() -> Path:
    """Builds helm from Go modules (or finds it in the cache); a cold build takes minutes."""
    out = subprocess.run([str(BUILD)], capture_output=True, text=True, timeout=45 * 60, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"helm build failed:\n{out.stderr[-4000:]}")
    return Path(out.stdout.strip().splitlines()[-1])


def _helm(helm: Path, *args: str, stdin: str = "") -> str:
    out = subprocess.run(
        [str(helm), *args], input=stdin, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, f"helm {' '.join(args)}:\n{out.stdout}\n{out.stderr}"
    return out.stdout


def _values(dotted: dict[str, Any]) -> dict[str, Any]:
    """{"a.b": 1} as {"a": {"b": 1}}: a values file, so types stay YAML's."""
    out: dict[str, Any] = {}
    for key, value in dotted.items():
        *parents, last = key.split(".")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value
    return out


def _template(
    helm: Path,
    *,
    namespace: str = "ingress",
    values: dict[str, Any] | None = None,
    files: tuple[Path, ...] = (),
) -> list[dict[str, Any]]:
    """``files`` first, then ``values`` (dotted keys) over them."""
    given = [a for f in files for a in ("--values", str(f))]
    text = _helm(
        helm, "template", RELEASE, str(CHART), "--namespace", namespace, *given,
        "--values", "-", stdin=yaml.safe_dump(_values(values or {})),
    )  # fmt: skip
    return [d for d in yaml.safe_load_all(text) if d]


def _refused(helm: Path, *values: str, files: tuple[Path, ...] = ()) -> str:
    """helm template's stderr for values the chart refuses (it must fail)."""
    given = [a for f in files for a in ("--values", str(f))]
    sets = [a for v in values for a in ("--set", v)]
    out = subprocess.run(
        [str(helm), "template", RELEASE, str(CHART), *given, *sets],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0, f"accepted: {values}"
    return out.stderr


def _one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(found) == 1, f"{kind} {name or ''}: {[d['metadata']['name'] for d in found]}"
    return found[0]


WORKLOADS = ("Deployment", "DaemonSet", "StatefulSet")


def _workload(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] in WORKLOADS]
    return found


def _container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """ferryman's container (the pod may have extraContainers after it)."""
    containers = _workload(docs)["spec"]["template"]["spec"]["containers"]
    assert containers[0]["name"] == "ferryman"
    return dict(containers[0])


def _args(docs: list[dict[str, Any]]) -> list[str]:
    args = _container(docs)["args"]
    assert all(isinstance(a, str) for a in args), args
    return list(args)


def _parse(args: list[str]) -> argparse.Namespace:
    """The real CLI's parser; its SystemExit (a refused flag) fails the test with the args."""
    try:
        return cli.parser().parse_args(args)
    except SystemExit as e:
        pytest.fail(f"ferryman refuses the rendered args (exit {e.code}): {args}")


def _run_flags() -> set[str]:
    sub = next(
        a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction)
    ).choices["run"]
    return {s for a in sub._actions for s in a.option_strings}


@pytest.mark.parametrize(
    "extra",
    [[], ["--strict"], ["--strict", "--set", "prometheus.serviceMonitor.create=true"]],
    ids=["lint", "strict", "strict-servicemonitor"],
)
def test_lint(helm_binary: Path, extra: list[str]) -> None:
    out = _helm(helm_binary, "lint", str(CHART), *extra)
    assert "1 chart(s) linted, 0 chart(s) failed" in out


def test_the_chart_installs_the_nic_crds(helm_binary: Path) -> None:
    """crds/ holds deploy/crds' VirtualServer, VirtualServerRoute and Policy CRDs; helm installs
    them before the templates (and never deletes them: users' objects live in them)."""
    out = _helm(helm_binary, "template", RELEASE, str(CHART), "--include-crds")
    crds = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "CustomResourceDefinition"]
    shipped = [
        yaml.safe_load(p.read_text()) for p in sorted(ROOT.glob("deploy/crds/k8s.nginx.org_*"))
    ]
    assert sorted(c["metadata"]["name"] for c in crds) == [
        "globalconfigurations.k8s.nginx.org",
        "policies.k8s.nginx.org",
        "transportservers.k8s.nginx.org",
        "virtualserverroutes.k8s.nginx.org",
        "virtualservers.k8s.nginx.org",
    ]
    assert sorted(crds, key=str) == sorted(shipped, key=str)


def test_lint_rejects_bad_values(helm_binary: Path) -> None:
    """values.schema.json: a log level the CLI does not know fails before any cluster sees it."""
    out = subprocess.run(
        [str(helm_binary), "template", RELEASE, str(CHART), "--set", "controller.logLevel=loud"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0 and "logLevel" in out.stderr


def test_termination_grace_must_exceed_the_shutdown_grace(helm_binary: Path) -> None:
    """Else the kubelet kills ferryman before in-flight requests could finish."""
    values = ["--set", "controller.shutdownGracePeriod=60"]
    out = subprocess.run(
        [str(helm_binary), "template", RELEASE, str(CHART), *values],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0
    assert "terminationGracePeriodSeconds must exceed controller.shutdownGracePeriod" in out.stderr


def test_template_defaults(helm_binary: Path) -> None:
    docs = _template(helm_binary, namespace="ingress")
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == sorted(
        [
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "IngressClass",
            "Deployment",
            "Service",
            "NetworkPolicy",
            "PodDisruptionBudget",
            # The readiness gate webhook's.
            "MutatingWebhookConfiguration",
            "Service",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            # The replicas' readiness gate reports (gated routing, on with the webhook).
            "Role",
            "RoleBinding",
            # --nginx-configmaps: the ConfigMap and the Role reading it.
            "ConfigMap",
            "Role",
            "RoleBinding",
        ]
    )
    name = f"{RELEASE}-ferryman"
    assert all(d["metadata"].get("namespace") in (None, "ingress") for d in docs)

    args = _args(docs)
    assert args[0] == "run"
    for flag in [
        "--state-dir=/var/lib/ferryman",
        "--http-port=80",
        "--https-port=443",
        "--ready-port=8081",
        "--metrics-port=9113",
        "--ingress-class=ferryman",
        "--log-format=text",
        "--log-level=info",
        "--report-ingress-status",
        f"--external-service=ingress/{name}",
        "--enable-leader-election=true",
        f"--leader-election-lock-name={name}-leader-election",
        "--leader-election-namespace=ingress",
        "--leader-election-lease-duration=30",
        "--leader-election-renew-deadline=15",
        "--leader-election-retry-period=7.5",
        "--worker-processes=auto",
        "--compute-full-forwarded-for=true",
        "--shutdown-grace-period=15",
        "--readiness-gate-webhook-port=8443",
        f"--readiness-gate-webhook-cert-secret=ingress/{name}-webhook-cert",
        f"--readiness-gate-webhook-cert-hosts={name}-webhook.ingress.svc",
        f"--readiness-gate-webhook-configuration={name}-readiness-gates",
    ]:
        assert flag in args, (flag, args)
    assert not [a for a in args if a.startswith(("--watch-namespace", "--ingress-address"))]
    off = ("--health-status", "--nginx-status", "--enable-latency-metrics", "--worker-shutdown")
    off += ("--strict-request-paths", "--global-configuration", "--enable-tls-passthrough")
    off += ("--enable-cert-manager",)
    assert not [a for a in args if a.startswith(off)]

    deployment = _one(docs, "Deployment", name)
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == name
    assert pod["terminationGracePeriodSeconds"] == 60
    assert pod["securityContext"]["runAsNonRoot"] is True
    container = _container(docs)
    assert container["image"] == "ferryman:0.1.0"
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["readinessProbe"]["httpGet"] == {"path": "/nginx-ready", "port": "readiness"}
    # The liveness probe is deploy/'s: /healthz, answered ready or not.
    deployed = yaml.safe_load((ROOT / "deploy" / "deployment.yaml").read_text())
    assert (
        container["livenessProbe"]
        == (deployed["spec"]["template"]["spec"]["containers"][0]["livenessProbe"])
    )
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "readiness"}
    assert {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]} == {
        "POD_NAME": "metadata.name",
        "POD_NAMESPACE": "metadata.namespace",
        "NODE_NAME": "spec.nodeName",
    }
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": 80, "https": 443, "readiness": 8081, "metrics": 9113, "webhook": 8443}

    service = _one(docs, "Service", name)
    assert service["spec"]["type"] == "LoadBalancer"
    assert {p["name"]: p["targetPort"] for p in service["spec"]["ports"]} == {
        "http": "http",
        "https": "https",
    }
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]

    ingress_class = _one(docs, "IngressClass", "ferryman")
    assert ingress_class["spec"]["controller"] == "ferryman.io/ingress-controller"
    assert "annotations" not in ingress_class["metadata"]

    # The same least-privilege rules as deploy/rbac.yaml (readiness gates on, as
    # the webhook implies); with neither, no rule for pods or namespaces.
    deploy = list(yaml.safe_load_all((ROOT / "deploy" / "rbac.yaml").read_text()))
    rules = _one(docs, "ClusterRole", name)["rules"]
    assert rules == _one(deploy, "ClusterRole")["rules"]
    assert "--readiness-gates" in _args(docs)
    off = {"readinessGateWebhook.enabled": False}
    plain = _template(helm_binary, namespace="ingress", values=off)
    assert _one(plain, "ClusterRole", name)["rules"] == rules[:-3]  # pods, pods/status, namespaces
    assert "--readiness-gates" not in _args(plain)
    gated = _template(
        helm_binary, namespace="ingress", values={**off, "controller.readinessGates.enable": True}
    )
    assert _one(gated, "ClusterRole", name)["rules"] == rules
    role = _one(docs, "Role", f"{name}-leader-election")
    assert role["metadata"]["namespace"] == "ingress"
    assert [r.get("resourceNames") for r in role["rules"]] == [None, [f"{name}-leader-election"]]
    deploy_verbs = [r["verbs"] for r in _one(deploy, "Role", "ferryman-leader-election")["rules"]]
    assert [r["verbs"] for r in role["rules"]] == deploy_verbs
    reports = _one(docs, "Role", f"{name}-replica-reports")["rules"]
    assert reports == _one(deploy, "Role", "ferryman-replica-reports")["rules"]
    assert not [d for d in plain if d["metadata"]["name"] == f"{name}-replica-reports"]
    subjects = [
        _one(docs, kind, n)["subjects"]
        for kind in ("ClusterRoleBinding", "RoleBinding")
        for n in (name, f"{name}-leader-election", f"{name}-readiness-gate-webhook")
        if not (kind == "ClusterRoleBinding" and n.endswith("-leader-election"))
        and not (kind == "RoleBinding" and n == name)
    ]
    assert subjects == [[{"kind": "ServiceAccount", "name": name, "namespace": "ingress"}]] * 4
    _assert_webhook_like_deploys(docs, name, "ingress")

    parsed = _parse(args)
    assert parsed.external_service == f"ingress/{name}"
    assert parsed.report_ingress_status and parsed.enable_leader_election

    # As deploy/: RuntimeDefault seccomp and a memory limit.
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["resources"]["limits"]["memory"] == "1Gi"


def _assert_webhook_like_deploys(docs: list[dict[str, Any]], name: str, namespace: str) -> None:
    """The readiness gate webhook's objects are deploy/webhook.yaml's, named after the
    release; its Service selects the Deployment's pods, whose label keeps them out."""
    deploy = list(yaml.safe_load_all((ROOT / "deploy" / "webhook.yaml").read_text()))
    config = _one(docs, "MutatingWebhookConfiguration", f"{name}-readiness-gates")
    (hook,) = config["webhooks"]
    (want,) = copy.deepcopy(_one(deploy, "MutatingWebhookConfiguration")["webhooks"])
    want["clientConfig"]["service"] |= {"namespace": namespace, "name": f"{name}-webhook"}
    assert hook == want
    assert (hook["failurePolicy"], hook["timeoutSeconds"]) == ("Fail", 3)
    service = _one(docs, "Service", f"{name}-webhook")["spec"]
    deployment = _one(docs, "Deployment", name)["spec"]
    assert service["selector"] == deployment["selector"]["matchLabels"]
    assert service["ports"] == _one(deploy, "Service")["spec"]["ports"]
    labels = deployment["template"]["metadata"]["labels"]
    assert labels["ferryman.io/pod-readiness-gate-inject"] == "disabled"
    role = _one(docs, "ClusterRole", f"{name}-readiness-gate-webhook")["rules"]
    (rule,) = _one(deploy, "ClusterRole")["rules"]
    assert role == [rule | {"resourceNames": [f"{name}-readiness-gates"]}]
    role = _one(docs, "Role", f"{name}-readiness-gate-webhook")["rules"]
    create, read = _one(deploy, "Role")["rules"]
    assert role == [create, read | {"resourceNames": [f"{name}-webhook-cert"]}]


def test_readiness_gate_webhook_off(helm_binary: Path) -> None:
    docs = _template(helm_binary, values={"readinessGateWebhook.enabled": False})
    assert not [d for d in docs if "webhook" in d["metadata"]["name"]]
    assert not [d for d in docs if d["kind"] == "MutatingWebhookConfiguration"]
    assert not [a for a in _args(docs) if a.startswith("--readiness-gate-webhook")]
    assert "webhook" not in {p["name"] for p in _container(docs)["ports"]}
    rules = _one(docs, "NetworkPolicy")["spec"]["ingress"]
    assert [[p["port"] for p in r["ports"]] for r in rules] == [
        ["http", "https", "readiness"],
        ["metrics"],
    ]


def _secret_verbs(rules: list[dict[str, Any]]) -> list[list[str]]:
    return [r["verbs"] for r in rules if "secrets" in r["resources"]]


def test_secrets_are_listed_and_watched_never_fetched(helm_binary: Path) -> None:
    """ferryman lists and watches Secrets; a `get` would let a compromised pod read any
    Secret by name without leaving a watch behind."""
    deploy = list(yaml.safe_load_all((ROOT / "deploy" / "rbac.yaml").read_text()))
    assert _secret_verbs(_one(deploy, "ClusterRole")["rules"]) == [["list", "watch"]]
    docs = _template(helm_binary)
    rules = _one(docs, "ClusterRole", f"{RELEASE}-ferryman")["rules"]
    assert _secret_verbs(rules) == [["list", "watch"]]
    docs = _template(helm_binary, values={"controller.watchNamespace": ["a", "b"]})
    roles = [d for d in docs if d["kind"] == "Role" and "secrets" in str(d["rules"])]
    webhook = [r for r in roles if r["metadata"]["name"].endswith("-readiness-gate-webhook")]
    assert [_secret_verbs(r["rules"]) for r in roles if r not in webhook] == [
        [["list", "watch"]]
    ] * 2
    # The webhook's Role gets (and watches) its own certificate's Secret only.
    (role,) = webhook
    assert role["metadata"]["namespace"] == "ingress"
    reads = [r for r in role["rules"] if "get" in r["verbs"]]
    assert [r["resourceNames"] for r in reads] == [[f"{RELEASE}-ferryman-webhook-cert"]]


def test_network_policy_limits_the_metrics_port(helm_binary: Path) -> None:
    docs = _template(helm_binary, values={"controller.nginxStatus.enable": True})
    policy = _one(docs, "NetworkPolicy")["spec"]
    assert (
        policy["podSelector"]["matchLabels"]
        == (_one(docs, "Deployment")["spec"]["selector"]["matchLabels"])
    )
    open_to_all, webhook, scrapers = policy["ingress"]
    assert "from" not in open_to_all
    assert [p["port"] for p in open_to_all["ports"]] == ["http", "https", "readiness"]
    # The API server's source addresses differ per cluster: open unless given.
    assert webhook == {"ports": [{"port": "webhook"}]}
    assert [p["port"] for p in scrapers["ports"]] == ["metrics", "nginx-status"]
    monitoring = {"kubernetes.io/metadata.name": "monitoring"}
    assert scrapers["from"] == [{"namespaceSelector": {"matchLabels": monitoring}}]
    # Every port named is one the container has.
    names = {p["name"] for p in _container(docs)["ports"]}
    assert {p["port"] for rule in policy["ingress"] for p in rule["ports"]} <= names
    # deploy/ has the same policy.
    deploy = yaml.safe_load((ROOT / "deploy" / "networkpolicy.yaml").read_text())["spec"]
    assert [p["port"] for p in deploy["ingress"][0]["ports"]] == ["http", "https", "readiness"]
    assert deploy["ingress"][1] == webhook
    assert deploy["ingress"][2] == {"ports": [{"port": "metrics"}], "from": scrapers["from"]}
    control_plane = [{"ipBlock": {"cidr": "10.0.0.0/28"}}]
    docs = _template(helm_binary, values={"networkPolicy.webhookFrom": control_plane})
    rules = _one(docs, "NetworkPolicy")["spec"]["ingress"]
    assert rules[1] == {"ports": [{"port": "webhook"}], "from": control_plane}
    assert not [d for d in _template(helm_binary, values={"networkPolicy.create": False})
                if d["kind"] == "NetworkPolicy"]  # fmt: skip


def test_template_service_monitor(helm_binary: Path) -> None:
    """NIC's prometheus.serviceMonitor: its endpoints name the Service port
    "prometheus", which the chart's prometheus Service has."""
    values = {
        "prometheus.serviceMonitor.create": True,
        "controller.ingressClass.setAsDefaultIngress": True,
    }
    docs = _template(helm_binary, values=values)
    monitor = _one(docs, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["endpoints"] == [{"port": "prometheus"}]
    metrics = _one(docs, "Service", f"{RELEASE}-ferryman-prometheus-service")
    assert metrics["spec"]["type"] == "ClusterIP"
    assert metrics["spec"]["ports"] == [
        {"name": "prometheus", "port": 9113, "targetPort": "metrics", "protocol": "TCP"}
    ]
    assert metrics["metadata"]["labels"]["service"] == "nginx-ingress-prometheus-service"
    # The ServiceMonitor selects the metrics Service only, never the LoadBalancer.
    selected = [
        d["metadata"]["name"]
        for d in docs
        if d["kind"] == "Service"
        and monitor["spec"]["selector"]["matchLabels"].items() <= d["metadata"]["labels"].items()
    ]
    assert selected == [f"{RELEASE}-ferryman-prometheus-service"]
    annotations = _one(docs, "IngressClass")["metadata"]["annotations"]
    assert annotations == {"ingressclass.kubernetes.io/is-default-class": "true"}
    assert "--report-ingress-status" in _args(docs)
    _parse(_args(docs))
    # prometheus.create false: no metrics port, flag 0, no scrape annotations.
    docs = _template(helm_binary, values={"prometheus.create": False})
    assert "--metrics-port=0" in _args(docs)
    assert "metrics" not in {p["name"] for p in _container(docs)["ports"]}
    assert "annotations" not in _workload(docs)["spec"]["template"]["metadata"]


def test_every_rendered_flag_is_the_clis(helm_binary: Path) -> None:
    everything = dict(EVERYTHING)
    if "--disable-ipv6" in _run_flags():  # the flag lands beside this chart change
        everything["controller.disableIPV6"] = True
    docs = _template(helm_binary, namespace="ingress", values=everything)
    args = _args(docs)
    parsed = _parse(args)
    assert parsed.log_format == "json" and parsed.log_level == "debug"
    assert parsed.watch_namespace == "a,b"
    assert parsed.readiness_gates is True
    assert parsed.nginx_reload_timeout == 2.5
    assert parsed.worker_processes == "4"
    assert parsed.shutdown_grace_period == 2.5
    assert (parsed.records_memory_size, parsed.max_record_bytes) == ("256m", 100000)
    assert sorted(parsed.allowed_host_suffixes) == [
        ("admin", "*"),
        ("team-a", "a.example.com"),
        ("team-a", "shop.test"),
    ]
    assert parsed.external_service == "other/lb"
    assert parsed.ingress_address == "192.0.2.1,lb.example.com"
    assert parsed.leader_election_lock_name == "my-lock"
    assert parsed.leader_election_namespace == "ingress"
    timings = (
        parsed.leader_election_lease_duration,
        parsed.leader_election_renew_deadline,
        parsed.leader_election_retry_period,
    )
    assert timings == (20, 10, 2)
    assert parsed.nginx_status_port == 8080
    assert parsed.nginx_status_allow_cidrs == ("10.0.0.0/8", "::1/128")
    assert parsed.health_status and parsed.health_status_uri == "/healthz"
    assert parsed.enable_gateway_api and parsed.gateway_controller_name == "example.com/gateway"
    assert parsed.gateway_addresses[0] == "10.0.0.10" and len(parsed.gateway_addresses) == 11
    assert parsed.enable_latency_metrics is True
    assert parsed.compute_full_forwarded_for is False
    assert parsed.strict_request_paths is True
    assert (parsed.http_port, parsed.https_port, parsed.ready_port, parsed.metrics_port) == (
        8000,
        8443,
        8082,
        9100,
    )
    ports = {p["name"]: p["containerPort"] for p in _container(docs)["ports"]}
    assert ports == {
        "http": 8000,
        "https": 8443,
        "readiness": 8082,
        "metrics": 9100,
        "nginx-status": 8080,
        "webhook": 9443,
    }
    assert parsed.readiness_gate_webhook_port == 9443
    assert parsed.readiness_gate_webhook_cert_secret == ("ingress", "my-cert")
    config = _one(docs, "MutatingWebhookConfiguration")
    assert parsed.readiness_gate_webhook_configuration == config["metadata"]["name"]
    assert config["webhooks"][0]["failurePolicy"] == "Ignore"
    assert config["webhooks"][0]["timeoutSeconds"] == 7
    secret_role = _one(docs, "Role", f"{RELEASE}-ferryman-readiness-gate-webhook")
    assert secret_role["rules"][1]["resourceNames"] == ["my-cert"]
    lease_role = _one(docs, "Role", f"{RELEASE}-ferryman-leader-election")
    assert lease_role["rules"][1]["resourceNames"] == ["my-lock"]
    assert parsed.readiness_gates is True and parsed.readiness_gate_timeout == 120
    status_patch = {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]}
    watched = [
        d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] == f"{RELEASE}-ferryman"
    ]
    assert [status_patch in r["rules"] for r in watched] == [True, True]  # a and b
    reports = _one(docs, "Role", f"{RELEASE}-ferryman-replica-reports")
    assert reports["metadata"]["namespace"] == "ingress"
    assert (parsed.machine_lifecycle_hooks, parsed.machine_drain_timeout) == ("openshift", 90)
    env = {e["name"]: e.get("valueFrom") for e in _container(docs)["env"]}
    assert env["NODE_NAME"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}

    assert parsed.nginx_configmaps == ("ingress", "my-config")
    assert parsed.ingress_nginx_configmap == ("ingress-nginx", "ingress-nginx-controller")
    inn_role = _one(docs, "Role", f"{RELEASE}-ferryman-ingress-nginx-config")
    assert inn_role["metadata"]["namespace"] == "ingress-nginx"
    data = _one(docs, "ConfigMap", "my-config")["data"]
    assert data == {"worker-processes": "2", "http2": "true", "log-format": "$a 'b'"}

    assert parsed.default_server_tls_secret == ("a", "default-tls")
    assert parsed.wildcard_tls_secret == ("ingress", f"{RELEASE}-ferryman-wildcard-tls")
    _one(docs, "Secret", f"{RELEASE}-ferryman-wildcard-tls")

    # Every flag of `ferryman run` that makes sense in a cluster has a value.
    rendered = {a.partition("=")[0] for a in args[1:]}
    assert rendered == _run_flags() - NOT_IN_CHART

    # Leader election off: no Role for the Lease, and the flag says false.
    docs = _template(
        helm_binary, values={"controller.reportIngressStatus.enableLeaderElection": False}
    )
    assert not [d for d in docs if d["kind"] in ("Role", "RoleBinding")
                and "leader" in d["metadata"]["name"]]  # fmt: skip
    assert _parse(_args(docs)).enable_leader_election is False
    assert not [a for a in _args(docs) if a.startswith("--leader-election-")]
    # Addresses given directly: no --external-service defaulted.
    values = {"controller.reportIngressStatus.ingressAddress": ["192.0.2.9"]}
    assert _parse(_args(_template(helm_binary, values=values))).external_service is None


def _harness_args(docs: list[dict[str, Any]]) -> list[str]:
    """The rendered args, but the harness's state dir and free ports (it passes them,
    and a free one for the webhook), and no grace period when the test stops it."""
    own = ("--state-dir", "--http-port", "--https-port", "--ready-port", "--metrics-port")
    own += ("--shutdown-grace-period", "--readiness-gate-webhook-port", "--nginx-status-port")
    rendered = _args(docs)[1:]
    args = [a for a in rendered if not a.startswith(own)]
    if [a for a in rendered if a.startswith("--nginx-status-port")]:
        args.append(f"--nginx-status-port={free_port()}")
    return [*args, f"--readiness-gate-webhook-port={free_port()}"]


def _assert_ca_bundle_kept(kube: Client, namespace: str) -> None:
    """Under the chart's RBAC the webhook made its Secret and set the caBundle."""
    name = f"{RELEASE}-ferryman"
    secret = wait_until(
        lambda: kube.get(Secret, f"{name}-webhook-cert", namespace=namespace), 60, "Secret"
    )

    def ca_bundles() -> list[str | None]:
        config = kube.get(MutatingWebhookConfiguration, f"{name}-readiness-gates")
        return [w.clientConfig.caBundle for w in config.webhooks or []]

    wait_until(lambda: ca_bundles() == [secret.data["ca.crt"]], 60, "caBundle")


def _assert_ingress_reported(kube: Client, namespace: str, ip: str) -> None:
    """The Ingress "web" got the Service's address in its status, and an Event."""

    def status() -> list[str]:
        ing = kube.get(Ingress, "web", namespace=namespace)
        lb = ing.status.loadBalancer if ing.status else None
        return [i.ip or "" for i in (lb.ingress or [])] if lb else []

    wait_until(lambda: status() == [ip], 60, "Ingress status from the Service")
    wait_until(
        lambda: [
            e
            for e in kube.list(Event, namespace=namespace)
            if e.regarding is not None and e.regarding.name == "web"
        ],
        60,
        "an Event for the Ingress",
    )


@contextlib.contextmanager
def _running(f: Ferryman, kube: Client, webhook: bool = True) -> Iterator[None]:
    """``f`` started under the chart's RBAC: when the block is done nothing it
    did was forbidden; it stops cleanly, and (``webhook``) the readiness-gate
    MutatingWebhookConfiguration goes: it is cluster-wide, and later tests'
    opted-in namespaces would call it."""
    f.start()
    try:
        yield
        assert "forbidden" not in f.logs().lower()
    finally:
        assert f.stop() == 0
        try:
            kube.delete(MutatingWebhookConfiguration, f"{RELEASE}-ferryman-readiness-gates")
        except ApiError as e:  # not rendered (or applied) by this test
            if webhook or e.status.code != 404:
                raise


def _token_kubeconfig(apiserver: APIServer, kube: Client, namespace: str, out: Path) -> str:
    return token_kubeconfig(apiserver, kube, namespace, f"{RELEASE}-ferryman", out)


def test_rendered_chart_applies_and_runs(
    tmp_path: Path, helm_binary: Path, apiserver: APIServer, kube: Client
) -> None:
    """The rendered objects apply; the rendered args under the chart's ServiceAccount run
    ferryman: it takes the Lease, and writes the Service's address and an Event, and
    a VirtualServer's and a VirtualServerRoute's status."""
    install_crds(kube, *NIC_CRDS)
    namespace = f"helm{next(_names)}"
    ingress_class = f"{namespace}-class"
    docs = _template(
        helm_binary, namespace=namespace, values={"controller.ingressClass.name": ingress_class}
    )
    kube.create(Namespace(metadata=ObjectMeta(name=namespace)))
    for obj in codecs.load_all_yaml(yaml.safe_dump_all(docs)):
        apply(kube, obj.to_dict())

    name = f"{RELEASE}-ferryman"
    deployment = kube.get(Deployment, name, namespace=namespace)
    assert deployment.spec is not None and deployment.spec.replicas == 2
    assert kube.get(ServiceAccount, name, namespace=namespace)
    service = kube.get(Service, name, namespace=namespace)
    assert service.spec is not None and service.spec.type == "LoadBalancer"
    assert kube.get(ClusterRole, name).rules
    binding = kube.get(ClusterRoleBinding, name)
    assert binding.subjects is not None and binding.subjects[0].namespace == namespace
    assert kube.get(Role, f"{name}-leader-election", namespace=namespace).rules
    assert kube.get(RoleBinding, f"{name}-leader-election", namespace=namespace).subjects
    ingress_class_object = kube.get(IngressClass, ingress_class)
    assert ingress_class_object.spec is not None
    assert ingress_class_object.spec.controller == "ferryman.io/ingress-controller"

    # What a cloud's load balancer would do, then an Ingress of the class.
    kube.patch(
        Service.Status,
        name,
        {"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.40"}]}}},
        namespace=namespace,
    )
    apply(
        kube,
        ingress("web", [rule("helm.test", path("/", "app"))], class_name=ingress_class,
                namespace=namespace),
    )  # fmt: skip
    vs = {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": {"name": "cafe", "namespace": namespace},
        "spec": {
            "ingressClassName": ingress_class,
            "host": "vs.helm.test",
            "upstreams": [{"name": "up", "service": "app", "port": 80}],
            "routes": [{"path": "/", "action": {"pass": "up"}}],
        },
    }
    wait_until(lambda: kube.create(VirtualServer(vs)), 60, "a VirtualServer")
    vsr = {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServerRoute",
        "metadata": {"name": "orphan", "namespace": namespace},
        "spec": {"ingressClassName": ingress_class, "host": "vsr.helm.test", "subroutes": []},
    }
    kube.create(VirtualServerRoute(vsr))

    f = Ferryman(
        tmp_path / "ferryman",
        extra_args=_harness_args(docs),
        kubeconfig=_token_kubeconfig(apiserver, kube, namespace, tmp_path / "sa.kubeconfig"),
        env={"POD_NAME": "edge-pod-0", "POD_NAMESPACE": namespace},
    )
    with _running(f, kube):

        def vs_state() -> Any:
            obj = kube.get(VirtualServer, "cafe", namespace=namespace)
            return (obj.get("status") or {}).get("state")

        wait_until(vs_state, 60, "the VirtualServer's status")

        def vsr_state() -> Any:
            obj = kube.get(VirtualServerRoute, "orphan", namespace=namespace)
            return (obj.get("status") or {}).get("reason")

        wait_until(lambda: vsr_state() == "NoVirtualServerFound", 60, "the VSR's status")
        lease = wait_until(
            lambda: kube.get(Lease, f"{name}-leader-election", namespace=namespace), 60, "Lease"
        )
        assert lease.spec.holderIdentity == "edge-pod-0"
        _assert_ingress_reported(kube, namespace, "192.0.2.40")
        _assert_ca_bundle_kept(kube, namespace)


def test_watch_namespace_runs_on_namespaced_roles(
    tmp_path: Path, helm_binary: Path, apiserver: APIServer, kube: Client
) -> None:
    """With watchNamespace the ServiceAccount may read only the watched namespaces (and
    IngressClasses): ferryman still serves there, writes status and Events, and cannot
    list Secrets anywhere else."""
    namespace = f"helm{next(_names)}"
    apps = f"{namespace}-apps"
    ingress_class = f"{namespace}-class"
    values = {
        "controller.ingressClass.name": ingress_class,
        "controller.watchNamespace": [apps],
        # Pods are read in the watched namespace only, namespaces cluster-wide.
        "controller.readinessGates.enable": True,
    }
    docs = _template(helm_binary, namespace=namespace, values=values)
    for ns in (namespace, apps):
        kube.create(Namespace(metadata=ObjectMeta(name=ns)))
    for obj in codecs.load_all_yaml(yaml.safe_dump_all(docs)):
        apply(kube, obj.to_dict())
    name = f"{RELEASE}-ferryman"
    kube.patch(
        Service.Status,
        name,
        {"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.41"}]}}},
        namespace=namespace,
    )
    apply(
        kube,
        ingress("web", [rule("ns.test", path("/", "app"))], class_name=ingress_class,
                namespace=apps),
    )  # fmt: skip

    kubeconfig = _token_kubeconfig(apiserver, kube, namespace, tmp_path / "sa.kubeconfig")
    sa = Client(config=KubeConfig.from_file(kubeconfig), field_manager="tests")
    assert list(sa.list(Secret, namespace=apps)) == []
    for where in (namespace, "default", "*"):
        with pytest.raises(ApiError) as e:
            list(sa.list(Secret, namespace=where))
        assert e.value.status.code == 403, where

    f = Ferryman(
        tmp_path / "ferryman",
        extra_args=_harness_args(docs),
        kubeconfig=kubeconfig,
        env={"POD_NAME": "edge-pod-ns", "POD_NAMESPACE": namespace},
    )
    with _running(f, kube):
        _assert_ingress_reported(kube, apps, "192.0.2.41")
        _assert_ca_bundle_kept(kube, namespace)


def test_readiness_gates_run_on_the_charts_rbac(
    tmp_path: Path, helm_binary: Path, apiserver: APIServer, kube: Client
) -> None:
    """readinessGates.enable: under the chart's ServiceAccount ferryman watches the
    opted-in namespace's Pods, publishes its replica report Lease, writes the gate
    condition (here True: no served Service selects the pod) and deletes its Lease
    when it stops."""
    namespace = f"helm{next(_names)}"
    apps = f"{namespace}-apps"
    values = {
        "controller.ingressClass.name": f"{namespace}-class",
        "controller.readinessGates.enable": True,
        # The webhook's Service is unreachable here (no kube-proxy): with the
        # default Fail the test's own pod would be refused.
        "readinessGateWebhook.failurePolicy": "Ignore",
    }
    docs = _template(helm_binary, namespace=namespace, values=values)
    kube.create(Namespace(metadata=ObjectMeta(name=namespace)))
    labels = {"ferryman.io/pod-readiness-gate-inject": "enabled"}
    kube.create(Namespace(metadata=ObjectMeta(name=apps, labels=labels)))
    kube.create(ServiceAccount(metadata=ObjectMeta(name="default", namespace=apps)))
    for obj in codecs.load_all_yaml(yaml.safe_dump_all(docs)):
        apply(kube, obj.to_dict())
    gate = f"target-health.ferryman.io/{namespace}-class"
    kube.create(
        Pod.from_dict(
            {
                "metadata": {"name": "web-1", "namespace": apps, "labels": {"app": "web"}},
                "spec": {
                    "readinessGates": [{"conditionType": gate}],
                    "containers": [{"name": "c", "image": "echo"}],
                },
            }
        )
    )
    f = Ferryman(
        tmp_path / "ferryman",
        extra_args=_harness_args(docs),
        kubeconfig=_token_kubeconfig(apiserver, kube, namespace, tmp_path / "sa.kubeconfig"),
        env={"POD_NAME": "edge-pod-0", "POD_NAMESPACE": namespace},
    )
    report = f"ferryman-report.{RELEASE}-ferryman-leader-election.edge-pod-0"
    with _running(f, kube):
        wait_until(lambda: kube.get(Lease, report, namespace=namespace), 60, "the report")

        def condition() -> str | None:
            pod = kube.get(Pod, "web-1", namespace=apps)
            found = [c for c in (pod.status.conditions or []) if c.type == gate]
            return found[0].reason if found and found[0].status == "True" else None

        assert wait_until(condition, 60, "the gate condition") == "NotServed"
    with pytest.raises(ApiError) as gone:
        kube.get(Lease, report, namespace=namespace)
    assert gone.value.status.code == 404


def test_machine_lifecycle_hooks_run_on_the_charts_rbac(
    tmp_path: Path, helm_binary: Path, apiserver: APIServer, kube: Client
) -> None:
    """machineLifecycleHooks.mode: under the chart's ServiceAccount ferryman watches
    Machines, publishes its report Lease and keeps its pre-drain and pre-terminate
    hooks on the Machine of the Node its replica runs on."""
    install_crds(kube, CRD)
    namespace = f"helm{next(_names)}"
    values = {
        "controller.ingressClass.name": f"{namespace}-class",
        "controller.machineLifecycleHooks.mode": "openshift",
    }
    docs = _template(helm_binary, namespace=namespace, values=values)
    kube.create(Namespace(metadata=ObjectMeta(name=namespace)))
    for obj in codecs.load_all_yaml(yaml.safe_dump_all(docs)):
        apply(kube, obj.to_dict())
    machine = {"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine"}
    machine["metadata"] = {"name": "m1", "namespace": namespace}
    wait_until(lambda: kube.create(Machine.from_dict({**machine, "spec": {}})), 60, "the CRD")
    kube.patch(
        Machine.Status, "m1", {"status": {"nodeRef": {"kind": "Node", "name": "edge-node"}}},
        namespace=namespace, patch_type=PatchType.MERGE,
    )  # fmt: skip
    f = Ferryman(
        tmp_path / "ferryman",
        extra_args=_harness_args(docs),
        kubeconfig=_token_kubeconfig(apiserver, kube, namespace, tmp_path / "sa.kubeconfig"),
        env={"POD_NAME": "edge-pod-0", "POD_NAMESPACE": namespace, "NODE_NAME": "edge-node"},
    )
    with _running(f, kube, webhook=False):
        ours = {"name": "IngressTrafficDrain", "owner": "ferryman.io/ingress-controller"}

        def hooks() -> Any:
            m = kube.get(Machine, "m1", namespace=namespace).to_dict()
            return (m.get("spec") or {}).get("lifecycleHooks")

        wanted = {"preDrain": [ours], "preTerminate": [ours]}
        wait_until(lambda: hooks() == wanted, 60, "ferryman's hooks")


def test_tenant_mode_may_watch_reference_grants(helm_binary: Path) -> None:
    """--allowed-host-suffixes follows references across namespaces only when a
    ReferenceGrant allows them: ferryman watches those, Gateway API or not."""

    def grants(docs: list[dict[str, Any]]) -> list[list[str]]:
        rules = _one(docs, "ClusterRole", f"{RELEASE}-ferryman")["rules"]
        return [r["verbs"] for r in rules if "referencegrants" in r["resources"]]

    assert grants(_template(helm_binary)) == []
    tenants = {"controller.allowedHostSuffixes": {"team-a": ["a.example.com"]}}
    assert grants(_template(helm_binary, values=tenants)) == [["get", "list", "watch"]]
    both = {**tenants, "controller.gatewayAPI.enable": True}
    assert grants(_template(helm_binary, values=both)) == [["get", "list", "watch"]]


def test_a_disruption_budget_keeps_one_replica_while_there_are_more(helm_binary: Path) -> None:
    """The webhook fails closed: a drain must not take every replica at once. One
    replica gets no budget (minAvailable 1 would hold its node's drain forever)."""
    docs = _template(helm_binary)
    pdb = _one(docs, "PodDisruptionBudget")["spec"]
    assert (
        pdb["selector"]["matchLabels"]
        == _one(docs, "Deployment")["spec"]["selector"]["matchLabels"]
    )
    assert pdb["minAvailable"] == 1
    single = _template(helm_binary, values={"controller.replicaCount": 1})
    assert not [d for d in single if d["kind"] == "PodDisruptionBudget"]
    off = _template(helm_binary, values={"controller.podDisruptionBudget.enabled": False})
    assert not [d for d in off if d["kind"] == "PodDisruptionBudget"]


# ---- NIC's values layout (issue 29): a NIC values file installs ferryman ----------------

NIC_VALUES = Path(__file__).with_name("nic-values.yaml")


def test_a_nic_values_file_renders_as_nic_would(helm_binary: Path) -> None:
    """tests/kubernetes/nic-values.yaml, a NIC 5.5 production values file with only
    the image changed, passes `helm lint --strict`, and what NIC's chart would make
    of it ferryman's chart makes: a DaemonSet with host ports, the TransportServer
    listeners' container and Service ports, a disruption budget, the default
    server's TLS Secret, the GlobalConfiguration; args ferryman's CLI accepts."""
    out = _helm(helm_binary, "lint", "--strict", str(CHART), "--values", str(NIC_VALUES))
    assert "1 chart(s) linted, 0 chart(s) failed" in out
    docs = _template(helm_binary, files=(NIC_VALUES,))
    name = f"{RELEASE}-ferryman"
    controller = f"{name}-controller"  # NIC's controller.name
    assert not [d for d in docs if d["kind"] in ("Deployment", "StatefulSet")]
    daemonset = _one(docs, "DaemonSet", controller)
    spec = daemonset["spec"]
    assert "replicas" not in spec
    assert spec["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 1},
    }
    assert spec["minReadySeconds"] == 5
    assert daemonset["metadata"]["annotations"] == {"team": "edge"}
    pod = spec["template"]["spec"]
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod["tolerations"][0]["key"] == "dedicated"
    assert pod["terminationGracePeriodSeconds"] == 30
    assert [c["name"] for c in pod["initContainers"]] == ["init-sysctl"]
    assert [c["name"] for c in pod["containers"]] == ["ferryman", "log-shipper"]
    assert [v["name"] for v in pod["volumes"]] == ["state", "extra-conf"]
    labels = spec["template"]["metadata"]["labels"]
    assert labels["tier"] == "edge"
    annotations = spec["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "true"

    container = _container(docs)
    ports = {(p["name"], p.get("protocol", "TCP")): p for p in container["ports"]}
    assert ports["http", "TCP"] == {"name": "http", "containerPort": 80, "hostPort": 80}
    assert ports["https", "TCP"]["hostPort"] == 443
    assert ports["dns-udp", "UDP"]["containerPort"] == 5353
    assert ports["dns-tcp", "TCP"]["containerPort"] == 5353
    assert ports["nginx-status", "TCP"]["containerPort"] == 8080
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "readiness"}
    assert {"name": "TZ", "value": "UTC"} in container["env"]
    assert container["volumeMounts"][1]["mountPath"] == "/etc/extra"
    assert container["resources"]["requests"]["cpu"] == "250m"

    service = _one(docs, "Service", controller)
    assert service["metadata"]["labels"]["tier"] == "edge"
    assert {(p["name"], p["protocol"]): p["port"] for p in service["spec"]["ports"]} == {
        ("http", "TCP"): 80,
        ("https", "TCP"): 443,
        ("dns-udp", "UDP"): 5353,
        ("dns-tcp", "TCP"): 5353,
    }
    pdb = _one(docs, "PodDisruptionBudget", controller)["spec"]
    assert pdb["maxUnavailable"] == 1 and "minAvailable" not in pdb
    assert not [d for d in docs if d["kind"] == "HorizontalPodAutoscaler"]
    secret = _one(docs, "Secret", f"{name}-default-server-tls")
    assert secret["type"] == "kubernetes.io/tls"
    assert set(secret["data"]) == {"tls.crt", "tls.key"}
    assert b"BEGIN CERTIFICATE" in base64.b64decode(secret["data"]["tls.crt"])
    listeners = _one(docs, "GlobalConfiguration", controller)["spec"]["listeners"]
    assert [(li["name"], li["port"]) for li in listeners] == [("dns-udp", 5353), ("dns-tcp", 5353)]
    assert _one(docs, "IngressClass", "nginx")
    config = _one(docs, "ConfigMap", f"{name}-nginx-config")["data"]
    assert config["proxy-read-timeout"] == "120s"
    # The TransportServers' listeners are open in the NetworkPolicy too.
    open_ports = _one(docs, "NetworkPolicy")["spec"]["ingress"][0]["ports"]
    assert {"port": 5353, "protocol": "UDP"} in open_ports
    assert {"port": 5353, "protocol": "TCP"} in open_ports
    metrics = _one(docs, "Service", f"{name}-prometheus-service")
    assert metrics["spec"]["ports"][0]["name"] == "prometheus"

    parsed = _parse(_args(docs))
    assert parsed.ingress_class == "nginx"
    assert parsed.nginx_reload_timeout == 60  # NIC's 60000 ms
    assert parsed.log_format == "json"
    assert parsed.external_service == f"ingress/{controller}"
    assert parsed.global_configuration == ("ingress", controller)
    assert parsed.enable_tls_passthrough and parsed.health_status
    assert parsed.nginx_status_port == 8080
    assert parsed.nginx_status_allow_cidrs == ("127.0.0.1/32",)
    assert parsed.enable_latency_metrics is True
    # The certificate's Secret is made and passed, as NIC's chart does.
    assert parsed.default_server_tls_secret == ("ingress", f"{RELEASE}-ferryman-default-server-tls")


def test_a_nic_values_file_brings_up_ferryman(
    tmp_path: Path, helm_binary: Path, apiserver: APIServer, kube: Client
) -> None:
    """The NIC values file's objects apply to a real API server, and its args run
    ferryman under the chart's ServiceAccount: Ingresses of class nginx get the
    Service's address, the chart's GlobalConfiguration gives a TransportServer its
    listener."""
    install_crds(kube, *NIC_CRDS)
    namespace = f"helm{next(_names)}"
    docs = _template(helm_binary, namespace=namespace, files=(NIC_VALUES,))
    # The listeners' ports are this machine's free ones (as the harness's are).
    listener = free_port()
    gc = _one(docs, "GlobalConfiguration")
    for li in gc["spec"]["listeners"]:
        li["port"] = listener
    kube.create(Namespace(metadata=ObjectMeta(name=namespace)))
    for obj in codecs.load_all_yaml(yaml.safe_dump_all(docs)):
        apply(kube, obj.to_dict())
    controller = f"{RELEASE}-ferryman-controller"
    assert kube.get(DaemonSet, controller, namespace=namespace)
    assert kube.get(Secret, f"{RELEASE}-ferryman-default-server-tls", namespace=namespace)
    kube.patch(
        Service.Status,
        controller,
        {"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.42"}]}}},
        namespace=namespace,
    )
    apply(
        kube,
        ingress("web", [rule("nic.test", path("/", "app"))], class_name="nginx",
                namespace=namespace),
    )  # fmt: skip
    ts = {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "TransportServer",
        "metadata": {"name": "dns", "namespace": namespace},
        "spec": {
            "ingressClassName": "nginx",
            "listener": {"name": "dns-tcp", "protocol": "TCP"},
            "upstreams": [{"name": "dns", "service": "dns", "port": 53}],
            "action": {"pass": "dns"},
        },
    }
    wait_until(lambda: kube.create(TransportServer(ts)), 60, "a TransportServer")
    f = Ferryman(
        tmp_path / "ferryman",
        extra_args=_harness_args(docs),
        kubeconfig=_token_kubeconfig(apiserver, kube, namespace, tmp_path / "sa.kubeconfig"),
        env={"POD_NAME": "edge-nic-0", "POD_NAMESPACE": namespace},
    )
    with _running(f, kube):
        _assert_ingress_reported(kube, namespace, "192.0.2.42")

        def ts_reason() -> Any:
            return status(kube, TransportServer, "dns", namespace).get("reason")

        assert wait_until(ts_reason, 60, "the TransportServer's status") == "AddedOrUpdated"


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ("controller.enableSnippets=true", "/controller/enableSnippets"),
        ("controller.nginxplus=true", "/controller/nginxplus"),
        ("controller.appprotect.enable=true", "/controller/appprotect/enable"),
        ("controller.appprotectdos.enable=true", "/controller/appprotectdos/enable"),
        ("controller.enableOIDC=true", "/controller/enableOIDC"),
        ("controller.enableCustomResources=false", "/controller/enableCustomResources"),
        ("controller.readyStatus.enable=false", "/controller/readyStatus/enable"),
        ("controller.watchSecretNamespace=secrets", "/controller/watchSecretNamespace"),
        ("controller.reportIngressStatus.ingressLink=bigip", "/controller/reportIngressStatus"),
        ("prometheus.secret=ingress/tls", "/prometheus/secret"),
        ("serviceInsight.create=true", "/serviceInsight/create"),
        ("nginxAgent.enable=true", "/nginxAgent/enable"),
        ("controller.kind=replicaset", "/controller/kind"),
        # ferryman's old keys moved to NIC's (README "What changed").
        ("image.tag=1.0", "additional properties 'image'"),
        ("controller.httpPort=8080", "additional properties 'httpPort'"),
    ],
)
def test_nic_values_ferryman_cannot_honour_are_refused(
    helm_binary: Path, value: str, path: str
) -> None:
    """values.schema.json refuses them, naming the value; its description (and the
    README) says why."""
    assert path in _refused(helm_binary, value)


def test_the_schema_says_why_a_value_is_refused() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    controller = schema["properties"]["controller"]["properties"]
    snippets = controller["enableSnippets"]
    assert snippets["const"] is False
    assert "snippets are never supported" in snippets["description"]
    assert "NGINX Plus" in controller["nginxplus"]["description"]


def test_ports_ferryman_cannot_split_are_refused(helm_binary: Path) -> None:
    """NGINX listens on defaultHTTP(S)ListenerPort: the container port must be it;
    TLS passthrough shares the HTTPS port."""
    err = _refused(helm_binary, "controller.containerPort.http=8080")
    assert "containerPort.http must equal controller.defaultHTTPListenerPort" in err
    err = _refused(
        helm_binary, "controller.enableTLSPassthrough=true", "controller.tlsPassthroughPort=8443"
    )
    assert "tlsPassthroughPort must equal" in err


def test_kind_statefulset_and_autoscaling(helm_binary: Path) -> None:
    values: dict[str, Any] = {
        "controller.kind": "statefulset",
        "controller.replicaCount": 3,
        "controller.strategy": {"type": "OnDelete"},
        "controller.statefulset.podManagementPolicy": "Parallel",
    }
    docs = _template(helm_binary, values=values)
    sts = _one(docs, "StatefulSet", f"{RELEASE}-ferryman")["spec"]
    assert sts["replicas"] == 3
    assert sts["serviceName"] == f"{RELEASE}-ferryman"
    assert sts["podManagementPolicy"] == "Parallel"
    assert sts["updateStrategy"] == {"type": "OnDelete"}
    assert sts["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Retain"
    _parse(_args(docs))

    scaled = {
        "controller.autoscaling.enabled": True,
        "controller.autoscaling.minReplicas": 2,
        "controller.autoscaling.maxReplicas": 6,
        "controller.autoscaling.targetMemoryUtilizationPercentage": None,
        "controller.autoscaling.behavior": {"scaleDown": {"stabilizationWindowSeconds": 300}},
        "controller.strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
    }
    docs = _template(helm_binary, values=scaled)
    deployment = _one(docs, "Deployment")["spec"]
    assert "replicas" not in deployment  # the HPA's
    assert deployment["strategy"]["rollingUpdate"] == {"maxSurge": 1}
    hpa = _one(docs, "HorizontalPodAutoscaler", f"{RELEASE}-ferryman")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": f"{RELEASE}-ferryman",
    }
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 6)
    assert [m["resource"]["name"] for m in hpa["spec"]["metrics"]] == ["cpu"]
    assert hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 300
    assert _one(docs, "PodDisruptionBudget")["spec"]["minAvailable"] == 1
    # An HPA of one replica at least gets no minAvailable budget (its drain would hang).
    one = _template(helm_binary, values={**scaled, "controller.autoscaling.minReplicas": 1})
    assert not [d for d in one if d["kind"] == "PodDisruptionBudget"]
    # autoscaling.create false: the HPA is the user's, the replicas still theirs.
    theirs = _template(helm_binary, values={**scaled, "controller.autoscaling.create": False})
    assert not [d for d in theirs if d["kind"] == "HorizontalPodAutoscaler"]
    assert "replicas" not in _one(theirs, "Deployment")["spec"]
    # A DaemonSet runs a pod per node: no HPA, no replicas; its budget stays.
    daemons = _template(helm_binary, values={**scaled, "controller.kind": "daemonset"})
    assert not [d for d in daemons if d["kind"] == "HorizontalPodAutoscaler"]
    assert "replicas" not in _one(daemons, "DaemonSet")["spec"]
    assert _one(daemons, "PodDisruptionBudget")["spec"]["minAvailable"] == 1
    assert "updateStrategy" in _one(daemons, "DaemonSet")["spec"]


def test_pod_parameters_of_nics_chart(helm_binary: Path) -> None:
    """hostNetwork, dnsPolicy, lifecycle, volumes, containers, pull secrets, the
    image digest, the startup probe: as NIC's chart renders them."""
    values: dict[str, Any] = {
        "controller.hostNetwork": True,
        "controller.dnsPolicy": "ClusterFirstWithHostNet",
        "controller.shareProcessNamespace": True,
        "controller.lifecycle": {"postStart": {"exec": {"command": ["true"]}}},
        "controller.volumes": [{"name": "certs", "secret": {"secretName": "certs"}}],
        "controller.volumeMounts": [{"name": "certs", "mountPath": "/certs"}],
        "controller.initContainers": [{"name": "init", "image": "busybox"}],
        "controller.extraContainers": [{"name": "sidecar", "image": "busybox"}],
        "controller.image.digest": "sha256:" + "a" * 64,
        "controller.serviceAccount.imagePullSecretName": "registry",
        "controller.serviceAccount.imagePullSecretsNames": ["mirror"],
        "controller.priorityClassName": "system-cluster-critical",
        "controller.startupStatus": {
            "enable": True,
            "port": 8081,
            "path": "/healthz",
            "failureThreshold": 30,
        },
        "controller.readyStatus.initialDelaySeconds": 2,
        "controller.topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
        ],
    }
    docs = _template(helm_binary, values=values)
    pod = _workload(docs)["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert pod["shareProcessNamespace"] is True
    # The node's network: the pod may not set net.* sysctls there.
    assert "sysctls" not in pod["securityContext"]
    assert pod["securityContext"]["runAsUser"] == 101
    assert pod["imagePullSecrets"] == [{"name": "registry"}, {"name": "mirror"}]
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["topologySpreadConstraints"][0]["topologyKey"] == "zone"
    assert [c["name"] for c in pod["initContainers"]] == ["init"]
    assert [c["name"] for c in pod["containers"]] == ["ferryman", "sidecar"]
    assert {"name": "certs", "secret": {"secretName": "certs"}} in pod["volumes"]
    container = _container(docs)
    assert container["image"] == "ferryman@sha256:" + "a" * 64
    assert container["lifecycle"] == {"postStart": {"exec": {"command": ["true"]}}}
    assert {"name": "certs", "mountPath": "/certs"} in container["volumeMounts"]
    assert container["startupProbe"] == {
        "httpGet": {"path": "/healthz", "port": 8081},
        "failureThreshold": 30,
    }
    assert container["readinessProbe"]["initialDelaySeconds"] == 2
    off = _template(helm_binary, values={"controller.livenessProbe.enable": False})
    assert "livenessProbe" not in _container(off)


def test_names_tls_config_and_rbac_values_of_nics_chart(helm_binary: Path) -> None:
    values: dict[str, Any] = {
        "controller.name": "controller",
        "serviceNameOverride": "edge-lb",
        "controller.defaultTLS.secret": "certs/default",
        "controller.wildcardTLS.cert": "Y2VydA==",
        "controller.wildcardTLS.key": "a2V5",
        "controller.customConfigMap": "my-nginx-config",
        "controller.globalConfiguration.create": True,
        "controller.globalConfiguration.customName": "tcp/listeners",
        "controller.globalConfiguration.spec": {
            "listeners": [{"name": "dns", "port": 5353, "protocol": "UDP"}]
        },
        "controller.reportIngressStatus.externalService": "public-lb",
        "controller.service.httpPort.nodePort": 30080,
        "controller.service.type": "NodePort",
        "controller.service.sessionAffinity.enable": True,
        "controller.service.httpsPort.enable": False,
        "controller.podDisruptionBudget.annotations": {"a": "b"},
        "rbac.clusterrole.create": False,
    }
    docs = _template(helm_binary, values=values)
    assert _workload(docs)["metadata"]["name"] == f"{RELEASE}-ferryman-controller"
    service = _one(docs, "Service", "edge-lb")["spec"]
    assert [(p["name"], p.get("nodePort")) for p in service["ports"]] == [("http", 30080)]
    assert service["sessionAffinity"] == "ClientIP"
    assert service["sessionAffinityConfig"] == {"clientIP": {"timeoutSeconds": 3600}}
    pdb = _one(docs, "PodDisruptionBudget", f"{RELEASE}-ferryman-controller")
    assert pdb["metadata"]["annotations"] == {"a": "b"}
    secrets = [d["metadata"]["name"] for d in docs if d["kind"] == "Secret"]
    assert secrets == [f"{RELEASE}-ferryman-wildcard-tls"]  # defaultTLS names its own
    assert not [d for d in docs if d["kind"] == "ConfigMap"]
    gc = _one(docs, "GlobalConfiguration")
    assert (gc["metadata"]["namespace"], gc["metadata"]["name"]) == ("tcp", "listeners")
    parsed = _parse(_args(docs))
    assert parsed.nginx_configmaps == ("ingress", "my-nginx-config")
    assert parsed.global_configuration == ("tcp", "listeners")
    assert parsed.external_service == "ingress/public-lb"
    assert not [
        d
        for d in docs
        if d["kind"] == "ClusterRole" and d["metadata"]["name"] == f"{RELEASE}-ferryman"
    ]
    assert _one(docs, "ClusterRoleBinding", f"{RELEASE}-ferryman")["roleRef"]["name"] == (
        f"{RELEASE}-ferryman"
    )
    # The default names are deploy/'s: <fullname> for the workload and Service.
    docs = _template(helm_binary)
    assert _workload(docs)["metadata"]["name"] == f"{RELEASE}-ferryman"
    assert _one(docs, "Service", f"{RELEASE}-ferryman")


def test_disable_ipv6_is_passed(helm_binary: Path) -> None:
    """controller.disableIPV6 renders --disable-ipv6 (ferryman's flag, added beside
    this chart change; not parsed here)."""
    assert "--disable-ipv6" not in _args(_template(helm_binary))
    docs = _template(helm_binary, values={"controller.disableIPV6": True})
    assert "--disable-ipv6" in _args(docs)


@pytest.mark.parametrize(
    "values",
    [
        {
            "controller.kind": "statefulset",
            "controller.autoscaling.enabled": True,
            "controller.strategy": {"type": "RollingUpdate"},
        },
        {
            "controller.autoscaling.enabled": True,
            "controller.autoscaling.behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}},
            "controller.hostNetwork": True,
            "controller.dnsPolicy": "ClusterFirstWithHostNet",
            "controller.startupStatus": {"enable": True, "port": 8081, "path": "/healthz"},
            "controller.wildcardTLS.cert": base64.b64encode(b"cert").decode(),
            "controller.wildcardTLS.key": base64.b64encode(b"key").decode(),
        },
    ],
    ids=["statefulset-hpa", "deployment-hpa-hostnetwork"],
)
def test_other_kinds_apply(helm_binary: Path, kube: Client, values: dict[str, Any]) -> None:
    """The API server takes what the other kinds and NIC's pod values render (the
    webhook off: its configuration is cluster-wide)."""
    namespace = f"helm{next(_names)}"
    values = {**values, "readinessGateWebhook.enabled": False}
    docs = _template(helm_binary, namespace=namespace, values=values)
    kube.create(Namespace(metadata=ObjectMeta(name=namespace)))
    for obj in codecs.load_all_yaml(yaml.safe_dump_all(docs)):
        apply(kube, obj.to_dict())
    name = f"{RELEASE}-ferryman"
    hpa = kube.get(HorizontalPodAutoscaler, name, namespace=namespace)
    assert hpa.spec is not None and hpa.spec.scaleTargetRef.kind == _workload(docs)["kind"]


def test_every_nic_value_path_is_accepted() -> None:
    """Each key path of NIC 5.5.4's chart is one values.schema.json takes: a NIC values
    file is never refused for a key it has (only for a value ferryman cannot honour)."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    lines = (Path(__file__).with_name("nic-value-paths.txt")).read_text().splitlines()
    paths = [line for line in lines if line and not line.startswith("#")]
    assert len(paths) > 150
    refused = []
    for dotted in paths:
        node = schema
        for key in dotted.split("."):
            properties = node.get("properties", {})
            if key in properties:
                node = properties[key]
            elif node.get("additionalProperties") is False:
                refused.append(dotted)
                break
            else:  # an open object (a map, or a refused feature's settings)
                break
    assert refused == []


def test_grafana_dashboard_configmap(helm_binary: Path) -> None:
    """prometheus.grafanaDashboard.create: the dashboard's JSON in a ConfigMap with
    the sidecar's label; none by default."""
    assert not [d for d in _template(helm_binary) if d["metadata"]["name"].endswith("dashboard")]
    docs = _template(helm_binary, values={"prometheus.grafanaDashboard.create": True})
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap" and "dashboard" in d["metadata"]["name"]]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(cm["data"]["ferryman.json"])
    assert dashboard == json.loads((CHART / "dashboards" / "ferryman.json").read_text())
    assert dashboard["panels"]


def test_cert_manager_passes_the_flag_and_the_rbac(helm_binary: Path) -> None:
    docs = _template(helm_binary, values={"controller.enableCertManager": True})
    assert "--enable-cert-manager" in _container(docs)["args"]
    (role,) = [
        d
        for d in docs
        if d["kind"] == "ClusterRole" and d["metadata"]["name"] == f"{RELEASE}-ferryman"
    ]
    rules = [r for r in role["rules"] if "cert-manager.io" in r["apiGroups"]]
    assert rules == [
        {
            "apiGroups": ["cert-manager.io"],
            "resources": ["certificates"],
            "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
        }
    ]
