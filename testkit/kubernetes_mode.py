"""ferryman in Kubernetes mode against the test apiserver, and the Events and status it
writes there.

Moved from tests/kubernetes/test_kubernetes_mode.py, whose tests and others share them."""

from __future__ import annotations

from pathlib import Path

from lightkube import Client
from lightkube.resources.events_v1 import Event
from lightkube.resources.networking_v1 import Ingress

from testkit.apiserver import APIServer
from testkit.harness import (
    Ferryman,
)


def _ferryman(
    tmp_path: Path, apiserver: APIServer, namespace: str, name: str = "a", *extra: str
) -> Ferryman:
    return Ferryman(
        tmp_path / name,
        extra_args=["--watch-namespace", namespace, *extra],
        kubeconfig=apiserver.kubeconfig,
        env={"POD_NAME": f"ferryman-{name}"},
    )


def _start(running: list[Ferryman], f: Ferryman) -> Ferryman:
    running.append(f)
    f.start()
    return f


def _events(kube: Client, namespace: str, name: str) -> list[Event]:
    return [
        e
        for e in kube.list(Event, namespace=namespace)
        if e.regarding is not None and e.regarding.name == name
    ]


def _status(kube: Client, namespace: str, name: str) -> list[str]:
    ing = kube.get(Ingress, name, namespace=namespace)
    lb = ing.status.loadBalancer if ing.status else None
    return [i.ip or i.hostname or "" for i in (lb.ingress if lb and lb.ingress else [])]
