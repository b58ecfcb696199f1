"""--nginx-configmaps against a real kube-apiserver: the one ConfigMap watched (in
another namespace than the watched ones), an edit reaching NGINX, NIC's Events."""

from __future__ import annotations

import time
from pathlib import Path

from lightkube import Client
from lightkube.resources.core_v1 import ConfigMap
from lightkube.resources.events_v1 import Event

from testkit.apiserver import APIServer, apply, wait_until
from testkit.configmap_docs import configmap
from testkit.harness import Ferryman, ingress, path, rule, service_with_backends
from testkit.netns import BackendHost


def _cm(namespace: str, **data: str) -> dict[str, object]:
    doc = configmap(**data)
    doc["metadata"] = {"name": "nginx-config", "namespace": namespace}
    return doc


def _events(kube: Client, namespace: str) -> list[tuple[str, str, str]]:
    return [
        (e.type or "", e.reason or "", e.note or "")
        for e in kube.list(Event, namespace=namespace)
        if e.regarding is not None
        and e.regarding.kind == "ConfigMap"
        and e.regarding.name == "nginx-config"
    ]


def test_a_configmap_edit_reaches_nginx_with_nic_events(
    tmp_path: Path, apiserver: APIServer, kube: Client, namespace: str, backends: BackendHost
) -> None:
    # The ConfigMap lives in the controller's namespace, not a watched one.
    home = f"{namespace}-ic"
    apply(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": home}})
    apply(kube, *service_with_backends("app", [backends.start("a")], namespace=namespace))
    apply(kube, ingress("web", [rule("cm.k8s.test", path("/", "app"))], namespace=namespace))
    apply(kube, _cm(home, server_tokens="true"))
    apply(kube, _cm(namespace, server_tokens="false"))  # same name, not the one named
    f = Ferryman(
        tmp_path / "a",
        extra_args=["--watch-namespace", namespace, "--nginx-configmaps", f"{home}/nginx-config"],
        kubeconfig=apiserver.kubeconfig,
        env={"POD_NAME": "ferryman-cm"},
    )
    f.start()
    try:
        assert f.get("cm.k8s.test").headers["server"].startswith("nginx/")
        wait_until(
            lambda: (
                (
                    "Normal",
                    "Updated",
                    f"ConfigMap {home}/nginx-config updated without error",
                )
                in _events(kube, home)
            ),
            60,
            "the Updated Event",
        )
        reloads = f.reloads()
        apply(kube, _cm(home, server_tokens="false", proxy_read_timeout="never"))
        wait_until(
            lambda: f.get("cm.k8s.test").headers["server"] == "nginx", 60, "server tokens off"
        )
        wait_until(
            lambda: (
                (
                    "Warning",
                    "InvalidValue",
                    f"ConfigMap {home}/nginx-config 'proxy-read-timeout' invalid time string "
                    '"never", ignoring',
                )
                in _events(kube, home)
            ),
            60,
            "the InvalidValue Event",
        )
        f.reloads_reach(reloads + 1)  # counted once confirmed: the traffic may come first
        # A change of labels only: nothing to reload.
        cm = kube.get(ConfigMap, "nginx-config", namespace=home)
        assert cm.metadata is not None
        cm.metadata.labels = {"touched": "yes"}
        kube.replace(cm)
        time.sleep(1.5)
        assert f.reloads() == reloads + 1
        # Deleted: ferryman's defaults (server tokens off) stay.
        kube.delete(ConfigMap, "nginx-config", namespace=home)
        wait_until(lambda: len(_events(kube, home)) >= 5, 60, "the deletion's Event")
        assert f.get("cm.k8s.test").headers["server"] == "nginx"
    finally:
        f.stop()


def test_ingress_nginxs_configmap_is_watched_under_nics(
    tmp_path: Path, apiserver: APIServer, kube: Client, namespace: str, backends: BackendHost
) -> None:
    """--ingress-nginx-configmap beside --nginx-configmaps, each in its own
    namespace: ingress-nginx's keys apply, NIC's win, its Warnings land on it."""
    home, old = f"{namespace}-ic", f"{namespace}-old"
    for ns in (home, old):
        apply(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    apply(kube, *service_with_backends("app", [backends.start("a")], namespace=namespace))
    apply(kube, ingress("web", [rule("inn.k8s.test", path("/", "app"))], namespace=namespace))
    inn = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "ingress-nginx-controller", "namespace": old},
        "data": {"proxy-body-size": "1k", "enable-brotli": "true"},
    }
    apply(kube, inn)
    f = Ferryman(
        tmp_path / "a",
        extra_args=[
            *("--watch-namespace", namespace),
            *("--nginx-configmaps", f"{home}/nginx-config"),
            *("--ingress-nginx-configmap", f"{old}/ingress-nginx-controller"),
        ],
        kubeconfig=apiserver.kubeconfig,
        env={"POD_NAME": "ferryman-inn"},
    )
    f.start()
    try:
        wait_until(
            lambda: f.get("inn.k8s.test", "/", method="POST", content=b"x" * 1025).status == 413,
            60,
            "ingress-nginx's proxy-body-size",
        )

        def notes() -> list[str]:
            return [
                e.note or ""
                for e in kube.list(Event, namespace=old)
                if e.regarding is not None and e.regarding.name == "ingress-nginx-controller"
            ]

        expected = (
            f"ConfigMap {old}/ingress-nginx-controller: not applied: enable-brotli: not "
            "applied by ferryman yet"
        )
        wait_until(lambda: expected in notes(), 60, "the NotApplied Event")
        apply(kube, _cm(home, client_max_body_size="2k"))
        wait_until(
            lambda: f.get("inn.k8s.test", "/", method="POST", content=b"x" * 1500).status == 200,
            60,
            "NIC's client-max-body-size",
        )
    finally:
        f.stop()


def test_a_named_configmap_stays_whole_when_every_configmap_is_watched(
    tmp_path: Path, apiserver: APIServer, kube: Client, namespace: str, backends: BackendHost
) -> None:
    """With Gateway API every ConfigMap of the watched namespaces is watched and
    held with ca.crt only (BackendTLSPolicy's CA bundles); the --nginx-configmaps
    one, in a watched namespace here, is seen by both informers and kept whole:
    its keys still reach NGINX."""
    apply(kube, *service_with_backends("app", [backends.start("a")], namespace=namespace))
    apply(kube, ingress("web", [rule("whole.k8s.test", path("/", "app"))], namespace=namespace))
    apply(kube, _cm(namespace, server_tokens="true"))
    f = Ferryman(
        tmp_path / "a",
        extra_args=[
            "--watch-namespace", namespace, "--nginx-configmaps", f"{namespace}/nginx-config",
            "--enable-gateway-api",
        ],
        kubeconfig=apiserver.kubeconfig,
        env={"POD_NAME": "ferryman-cm-whole"},
    )  # fmt: skip
    f.start()
    try:
        assert f.get("whole.k8s.test").headers["server"].startswith("nginx/")
        apply(kube, _cm(namespace, server_tokens="false"))
        wait_until(
            lambda: f.get("whole.k8s.test").headers["server"] == "nginx", 60, "server tokens off"
        )
    finally:
        f.stop()
