"""Mergeable Ingresses and nginx.org annotations in Kubernetes mode on a real
kube-apiserver: NIC's Events (Rejected with NIC's message, NoIngressMasterFound)
and the status addresses of a served minion."""

from __future__ import annotations

from pathlib import Path

from lightkube import Client

from testkit.apiserver import APIServer, apply, wait_until
from testkit.harness import Ferryman, ingress, path, rule, service_with_backends
from testkit.kubernetes_mode import _events, _ferryman, _start, _status
from testkit.netns import BackendHost

HOST = "cafe.test"


def test_mergeable_events_and_status(
    tmp_path: Path, apiserver: APIServer, kube: Client, namespace: str, backends: BackendHost,
    running: list[Ferryman],
) -> None:  # fmt: skip
    apply(kube, *service_with_backends("app", [backends.start("a")], namespace=namespace))
    minion = ingress(
        "tea",
        [rule(HOST, path("/tea", "app"))],
        annotations={"nginx.org/mergeable-ingress-type": "minion"},
        namespace=namespace,
    )
    apply(kube, minion)
    f = _start(
        running,
        _ferryman(
            tmp_path, apiserver, namespace, "a",
            "--report-ingress-status", "--ingress-address", "192.0.2.10",
        ),
    )  # fmt: skip
    wait_until(
        lambda: any(e.reason == "NoIngressMasterFound" for e in _events(kube, namespace, "tea")),
        60,
        "orphan",
    )
    master = ingress(
        "cafe",
        [{"host": HOST}],
        annotations={"nginx.org/mergeable-ingress-type": "master"},
        namespace=namespace,
    )
    apply(kube, master)
    wait_until(lambda: f.get(HOST, "/tea").served_by == "a", 60, "served")
    wait_until(lambda: _status(kube, namespace, "tea") == ["192.0.2.10"], 60, "minion status")
    wait_until(lambda: _events(kube, namespace, "tea")[-1].reason == "AddedOrUpdated", 60, "served")
    # An invalid annotation rejects the master with NIC's message.
    master["metadata"]["annotations"]["nginx.org/proxy-read-timeout"] = "soon"
    apply(kube, master)
    wait_until(
        lambda: any(
            e.reason == "Rejected"
            and 'annotations.nginx.org/proxy-read-timeout: Invalid value: "soon": must be a time'
            in (e.note or "")
            for e in _events(kube, namespace, "cafe")
        ),
        60,
        "Rejected",
    )
    wait_until(lambda: f.get(HOST, "/tea").status == 404, 60, "no master")
    wait_until(
        lambda: _events(kube, namespace, "tea")[-1].reason == "NoIngressMasterFound", 60, "orphan"
    )
