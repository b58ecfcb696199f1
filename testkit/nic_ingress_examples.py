"""NIC's ingress-resources examples: the cafe application and the examples' manifests,
applied unchanged.

Moved from tests/integration/test_nic_ingress_examples.py, whose tests and others share them."""

from __future__ import annotations

from testkit.harness import (
    Backends,
    Ferryman,
    service_with_backends,
)
from testkit.nic_fixtures import NIC_EXAMPLES

EXAMPLES = NIC_EXAMPLES.parent / "ingress-resources"


HOST = "cafe.example.com"


def _cafe(f: Ferryman, backends: Backends) -> None:
    """Class "nginx" as the cluster's default (some READMEs' Ingresses name none)."""
    f.extra_args += ["--ingress-class", "nginx"]
    annotations = {"ingressclass.kubernetes.io/is-default-class": "true"}
    f.write(
        "class",
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "IngressClass",
            "metadata": {"name": "nginx", "annotations": annotations},
            "spec": {"controller": "ferryman.io/ingress-controller"},
        },
    )
    f.write("tea", service_with_backends("tea-svc", [backends.start("tea")]))
    f.write("coffee", service_with_backends("coffee-svc", [backends.start("coffee")]))


def example(f: Ferryman, folder: str, *names: str) -> None:
    """The folder's manifest files, unchanged."""
    for name in names:
        f.write_text(f"{folder}-{name}", (EXAMPLES / folder / name).read_text())


def last_event(f: Ferryman, name: str, kind: str = "Ingress") -> dict[str, str]:
    return [e for e in f.events_for(name) if e.get("kind") == kind][-1]
