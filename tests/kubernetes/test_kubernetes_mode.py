"""Kubernetes mode against a real kube-apiserver: informers, Events, status, leases."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Service
from lightkube.resources.discovery_v1 import EndpointSlice
from lightkube.resources.networking_v1 import Ingress

from testkit.apiserver import APIServer, apply, wait_until
from testkit.harness import (
    Ferryman,
    ingress,
    path,
    rule,
    served_by,
    service_with_backends,
    tls_secret,
)
from testkit.kubernetes_mode import _events, _ferryman, _start, _status
from testkit.netns import BackendHost


@pytest.fixture
def running(tmp_path: Path, apiserver: APIServer, namespace: str) -> Iterator[list[Ferryman]]:
    started: list[Ferryman] = []
    yield started
    for f in started:
        if f.proc is not None:
            f.stop()


def test_api_changes_reach_nginx_within_a_second(
    tmp_path: Path, apiserver: APIServer, kube: Client, namespace: str, backends: BackendHost,
    running: list[Ferryman],
) -> None:  # fmt: skip
    a, b = backends.start("a"), backends.start("b")
    apply(kube, *service_with_backends("app", [a], namespace=namespace))
    apply(kube, ingress("web", [rule("k8s.test", path("/", "app"))], namespace=namespace))
    f = _start(running, _ferryman(tmp_path, apiserver, namespace))
    assert served_by(f, "k8s.test", "/") == "a"

    def follows(check: Any, what: str) -> None:
        wait_until(check, 1.0, what)

    apply(kube, *service_with_backends("app", [b], namespace=namespace))
    kube.delete(EndpointSlice, "app-a", namespace=namespace)  # the rollout replaced a by b
    follows(
        lambda: {served_by(f, "k8s.test", f"/x{i}") for i in range(4)} == {"b"},
        "endpoint change",
    )
    apply(kube, ingress("web", [rule("k8s.test", path("/only", "app"))], namespace=namespace))
    follows(lambda: served_by(f, "k8s.test", "/x") == "404", "ingress update")
    assert served_by(f, "k8s.test", "/only") == "b"
    apply(kube, tls_secret("web-tls", ["k8s.test"], namespace=namespace))
    apply(
        kube,
        ingress(
            "web",
            [rule("k8s.test", path("/", "app"))],
            tls=[{"hosts": ["k8s.test"], "secretName": "web-tls"}],
            namespace=namespace,
        ),
    )
    follows(lambda: f.get("k8s.test", "/", https=True).served_by == "b", "TLS")
    kube.delete(Ingress, "web", namespace=namespace)
    follows(lambda: served_by(f, "k8s.test", "/") == "404", "ingress deletion")
    kube.delete(Service, "app", namespace=namespace)
    assert f.reloads() == 1


def test_kubernetes_mode_on_angie(
    tmp_path: Path, apiserver: APIServer, kube: Client, namespace: str, backends: BackendHost,
    running: list[Ferryman],
) -> None:  # fmt: skip
    """Angie in Kubernetes mode (scripts/build-angie.sh's, the records data
    plane): the informers' changes reach it with no reload, and Events and
    status are written as with NGINX."""
    a, b = backends.start("a"), backends.start("b")
    apply(kube, *service_with_backends("app", [a], namespace=namespace))
    apply(kube, ingress("web", [rule("k8s.test", path("/", "app"))], namespace=namespace))
    f = _ferryman(
        tmp_path, apiserver, namespace, "a",
        "--report-ingress-status", "--ingress-address", "192.0.2.10",
        "--leader-election-namespace", namespace,
    )  # fmt: skip
    f.flavour = "angie"
    _start(running, f)
    assert served_by(f, "k8s.test", "/") == "a"
    apply(kube, *service_with_backends("app", [b], namespace=namespace))
    kube.delete(EndpointSlice, "app-a", namespace=namespace)
    wait_until(
        lambda: {served_by(f, "k8s.test", f"/x{i}") for i in range(4)} == {"b"}, 60, "endpoints"
    )
    assert f.reloads() == 1  # the start-up's
    apply(kube, ingress("web", [rule("k8s.test", path("/only", "app"))], namespace=namespace))
    wait_until(lambda: served_by(f, "k8s.test", "/x") == "404", 60, "ingress update")
    assert served_by(f, "k8s.test", "/only") == "b"
    assert f.reloads() == 1
    wait_until(lambda: _status(kube, namespace, "web") == ["192.0.2.10"], 60, "status")
    ev = wait_until(lambda: _events(kube, namespace, "web"), 60, "event")[-1]
    assert ev.reason == "AddedOrUpdated"


def test_events_and_status(
    tmp_path: Path, apiserver: APIServer, kube: Client, namespace: str, backends: BackendHost,
    running: list[Ferryman],
) -> None:  # fmt: skip
    apply(kube, *service_with_backends("app", [backends.start("a")], namespace=namespace))
    apply(kube, ingress("good", [rule("good.test", path("/", "app"))], namespace=namespace))
    _start(
        running,
        _ferryman(
            tmp_path, apiserver, namespace, "a",
            "--report-ingress-status", "--ingress-address", "192.0.2.10",
            "--leader-election-namespace", namespace,
            "--leader-election-lease-duration", "4", "--leader-election-renew-deadline", "3",
            "--leader-election-retry-period", "0.5",
        ),
    )  # fmt: skip
    wait_until(lambda: _status(kube, namespace, "good") == ["192.0.2.10"], 60, "status")
    ev = wait_until(lambda: _events(kube, namespace, "good"), 60, "event")[-1]
    assert ev.reason == "AddedOrUpdated"
    assert ev.type == "Normal"
    assert ev.reportingController == "ferryman.io/ingress-controller"

    # An Ingress turning invalid is rejected with the field, and loses its status.
    apply(kube, ingress("good", [rule("good.test", path("/a{b}", "app"))], namespace=namespace))
    wait_until(
        lambda: any(e.reason == "Rejected" and "paths[0].path" in (e.note or "")
                    for e in _events(kube, namespace, "good")),
        60, "Rejected event",
    )  # fmt: skip
    wait_until(lambda: _status(kube, namespace, "good") == [], 60, "status cleared")


def _holder(kube: Client, namespace: str) -> str | None:
    lease = kube.get(Lease, "ferryman-leader-election", namespace=namespace)
    return lease.spec.holderIdentity if lease.spec else None


def test_second_replica_takes_over_status_writing(
    tmp_path: Path, apiserver: APIServer, kube: Client, namespace: str, backends: BackendHost,
    running: list[Ferryman],
) -> None:  # fmt: skip
    apply(kube, *service_with_backends("app", [backends.start("a")], namespace=namespace))
    args = (
        "--report-ingress-status", "--ingress-address", "192.0.2.20",
        "--leader-election-namespace", namespace,
        "--leader-election-lease-duration", "4", "--leader-election-renew-deadline", "3",
        "--leader-election-retry-period", "0.5",
    )  # fmt: skip
    a = _start(running, _ferryman(tmp_path, apiserver, namespace, "a", *args))
    wait_until(lambda: _holder(kube, namespace) == "ferryman-a", 60, "a leads")
    b = _start(running, _ferryman(tmp_path, apiserver, namespace, "b", *args))
    assert served_by(b, "none.test", "/") == "404"  # every replica serves traffic
    a.stop()
    wait_until(lambda: _holder(kube, namespace) == "ferryman-b", 4, "b takes over")
    apply(kube, ingress("later", [rule("later.test", path("/", "app"))], namespace=namespace))
    wait_until(lambda: _status(kube, namespace, "later") == ["192.0.2.20"], 60, "b writes")
    assert served_by(b, "later.test", "/") == "a"


def test_nginx_matches_the_api_after_an_apiserver_restart(
    tmp_path: Path, apiserver: APIServer, kube: Client, namespace: str, backends: BackendHost,
    running: list[Ferryman],
) -> None:  # fmt: skip
    pod = backends.start("pod")
    apply(kube, *service_with_backends("app", [pod], namespace=namespace))
    for i in range(5):
        apply(kube, ingress(f"i{i}", [rule(f"h{i}.test", path("/", "app"))], namespace=namespace))
    f = _start(running, _ferryman(tmp_path, apiserver, namespace))
    apiserver.stop()
    assert served_by(f, "h0.test", "/") == "pod"  # traffic goes on without the API
    apiserver.start()
    kube = apiserver.client()
    kube.delete(Ingress, "i0", namespace=namespace)
    apply(kube, ingress("i9", [rule("h9.test", path("/", "app"))], namespace=namespace))
    wait_until(lambda: served_by(f, "h9.test", "/") == "pod", 60, "added after restart")
    wait_until(lambda: served_by(f, "h0.test", "/") == "404", 60, "deleted after restart")
    assert all(served_by(f, f"h{i}.test", "/") == "pod" for i in range(1, 5))


def test_watch_gap_after_compaction_is_recovered_by_relisting(
    tmp_path: Path, apiserver_binary: Path, backends: BackendHost, running: list[Ferryman]
) -> None:
    server = APIServer(
        apiserver_binary, tmp_path / "compacting", "--etcd-compaction-interval", "2s"
    )
    server.start()
    try:
        kube = server.client()
        from lightkube.models.meta_v1 import ObjectMeta
        from lightkube.resources.core_v1 import Namespace

        kube.create(Namespace(metadata=ObjectMeta(name="gap")))
        pod = backends.start("pod")
        apply(kube, *service_with_backends("app", [pod], namespace="gap"))
        apply(kube, ingress("keep", [rule("keep.test", path("/", "app"))], namespace="gap"))
        apply(kube, ingress("drop", [rule("drop.test", path("/", "app"))], namespace="gap"))
        f = _start(running, _ferryman(tmp_path, server, "gap"))
        assert served_by(f, "drop.test", "/") == "pod"
        # Changes while the API server is down cannot be watched; afterwards
        # compaction makes the old resourceVersion unusable (410 Gone).
        server.stop()
        server.start()
        kube = server.client()
        kube.delete(Ingress, "drop", namespace="gap")
        for i in range(30):  # move the revision well past the watch's
            apply(kube, ingress("churn", [rule(f"c{i}.test", path("/", "app"))], namespace="gap"))
        apply(kube, ingress("new", [rule("new.test", path("/", "app"))], namespace="gap"))
        wait_until(lambda: served_by(f, "new.test", "/") == "pod", 60, "added")
        wait_until(lambda: served_by(f, "drop.test", "/") == "404", 60, "deleted")
        assert served_by(f, "keep.test", "/") == "pod"
        assert served_by(f, "c29.test", "/") == "pod"
        kube.list(EndpointSlice, namespace="gap")
    finally:
        server.stop()


def test_status_follows_the_external_service(
    tmp_path: Path, apiserver: APIServer, kube: Client, namespace: str, backends: BackendHost,
    running: list[Ferryman],
) -> None:  # fmt: skip
    from lightkube.resources.core_v1 import Service as ServiceResource
    from lightkube.types import PatchType

    apply(
        kube,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "edge", "namespace": namespace},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
        },
    )
    kube.patch(
        ServiceResource.Status,
        "edge",
        {"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}}},
        namespace=namespace,
        patch_type=PatchType.MERGE,
    )
    apply(kube, *service_with_backends("app", [backends.start("a")], namespace=namespace))
    apply(kube, ingress("web", [rule("ext.test", path("/", "app"))], namespace=namespace))
    _start(
        running,
        _ferryman(
            tmp_path, apiserver, namespace, "a",
            "--report-ingress-status", "--external-service", f"{namespace}/edge",
            "--enable-leader-election", "false",
        ),
    )  # fmt: skip
    wait_until(lambda: _status(kube, namespace, "web") == ["203.0.113.7"], 60, "status")
