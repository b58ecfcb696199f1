"""The objects of a served app on the test cluster (Deployment, Service) and its
rollout's state, shared by tests/kubernetes and bench/rollout.py."""

from __future__ import annotations

from typing import Any

from lightkube import Client
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Pod


def deployment(name: str, namespace: str, replicas: int, version: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "terminationGracePeriodSeconds": 5,
                    "containers": [
                        {
                            "name": "echo",
                            "image": "echo",
                            "ports": [{"containerPort": 8080}],
                            # Serve on for 2 s after SIGTERM, as a well-behaved
                            # app (or a preStop sleep) does, so that ferryman
                            # learns of the pod's end before its address goes.
                            "env": [
                                {"name": "VERSION", "value": version},
                                {"name": "TERM_DELAY", "value": "2"},
                            ],
                        }
                    ],
                },
            },
        },
    }


def service(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 8080}]},
    }


def live_pods(kube: Client, namespace: str) -> set[str]:
    return {
        p.metadata.name
        for p in kube.list(Pod, namespace=namespace)
        if not p.metadata.deletionTimestamp
    }


def rolled_out(kube: Client, namespace: str, name: str, replicas: int) -> bool:
    """The Deployment's controller has seen its last change and all ``replicas``
    pods are of the newest template and available (older ones may still terminate)."""
    d = kube.get(Deployment, name, namespace=namespace)
    s = d.status
    return bool(
        s
        and s.observedGeneration == d.metadata.generation
        and s.replicas == s.updatedReplicas == s.availableReplicas == replicas
    )
