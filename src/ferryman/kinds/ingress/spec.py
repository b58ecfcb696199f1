"""Ingress and IngressClass (networking.k8s.io/v1) as the engine knows them."""

from __future__ import annotations

from ferryman.engine.kind_spec import KindSpec

INGRESS = KindSpec(
    "Ingress", "networking.k8s.io", "v1", "ingresses", keeps=("spec",), reported=("status",)
)
INGRESS_CLASS = KindSpec(
    "IngressClass", "networking.k8s.io", "v1", "ingressclasses", namespaced=False, keeps=("spec",),
    counted=False,
)  # fmt: skip
SPECS = (INGRESS, INGRESS_CLASS)
