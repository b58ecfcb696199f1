"""ingress-nginx's canary Ingresses in Kubernetes mode on a real kube-apiserver:
the canary created before its main claims no host (it is older, yet the main
serves the host), its Events, its status addresses once it joins, and its
deletion sending every request to the main (kinds/ingress/records/canary_host.py)."""

from __future__ import annotations

from pathlib import Path

from lightkube import Client
from lightkube.resources.networking_v1 import Ingress

from testkit.apiserver import APIServer, apply, wait_until
from testkit.harness import Ferryman, ingress, path, rule, service_with_backends
from testkit.kubernetes_mode import _events, _ferryman, _start, _status
from testkit.netns import BackendHost

HOST = "canary.test"
P = "nginx.ingress.kubernetes.io/"


def test_canary_events_status_and_deletion(
    tmp_path: Path, apiserver: APIServer, kube: Client, namespace: str, backends: BackendHost,
    running: list[Ferryman],
) -> None:  # fmt: skip
    apply(kube, *service_with_backends("stable", [backends.start("a")], namespace=namespace))
    apply(kube, *service_with_backends("next", [backends.start("c")], namespace=namespace))
    canary = ingress(
        "web-canary",
        [rule(HOST, path("/", "next"))],
        annotations={P + "canary": "true", P + "canary-by-header": "X-Canary"},
        namespace=namespace,
    )
    apply(kube, canary)
    f = _start(
        running,
        _ferryman(
            tmp_path, apiserver, namespace, "a",
            "--report-ingress-status", "--ingress-address", "192.0.2.10",
        ),
    )  # fmt: skip
    wait_until(
        lambda: any(
            e.reason == "Rejected" and "no main Ingress serves it" in (e.note or "")
            for e in _events(kube, namespace, "web-canary")
        ),
        10,
        "canary without a main",
    )
    assert f.get(HOST, "/").status == 404  # not served on its own
    apply(kube, ingress("web", [rule(HOST, path("/", "stable"))], namespace=namespace))
    wait_until(lambda: f.get(HOST, "/").served_by == "a", 10, "the main serves the host")
    wait_until(
        lambda: f.get(HOST, "/", headers={"X-Canary": "always"}).served_by == "c", 10, "canary"
    )
    wait_until(
        lambda: _events(kube, namespace, "web-canary")[-1].reason == "AddedOrUpdated", 10, "joined"
    )
    wait_until(lambda: _status(kube, namespace, "web-canary") == ["192.0.2.10"], 10, "status")
    kube.delete(Ingress, "web-canary", namespace=namespace)
    wait_until(
        lambda: f.get(HOST, "/", headers={"X-Canary": "always"}).served_by == "a", 10, "removed"
    )
    assert f.reloads() == 1
