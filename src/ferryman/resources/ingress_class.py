"""networking.k8s.io/v1 IngressClass: which Ingresses are ferryman's.

Shared vocabulary: the class it says is served (``ClassPolicy``) decides for
VirtualServers and TransportServers too (their ``ingressClassName``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ferryman.resources.meta import InvalidResource, parse_meta

DEFAULT_CLASS_ANNOTATION = "ingressclass.kubernetes.io/is-default-class"
# The IngressClass controllers whose class ferryman serves in full (the default
# class too) when --ingress-class names it: its own, and those of the two
# controllers it replaces. A class object's spec.controller cannot be changed,
# so a cluster moving from NIC or ingress-nginx keeps their value.
SERVED_CONTROLLERS = frozenset(
    {"ferryman.io/ingress-controller", "nginx.org/ingress-controller", "k8s.io/ingress-nginx"}
)


@dataclass(frozen=True)
class IngressClass:
    name: str
    controller: str
    is_default: bool


def parse_ingress_class(obj: Mapping[str, Any]) -> IngressClass:
    """Raises InvalidResource when the class cannot be read at all."""
    meta = parse_meta(obj)
    spec = obj.get("spec")
    if spec is not None and not isinstance(spec, Mapping):
        raise InvalidResource(["spec: must be an object"])
    controller = spec.get("controller") if spec is not None else None
    if controller is not None and not isinstance(controller, str):
        raise InvalidResource(["spec.controller: must be a string"])
    return IngressClass(
        name=meta.name,
        controller=controller or "",
        is_default=meta.annotations.get(DEFAULT_CLASS_ANNOTATION, "").lower() == "true",
    )


@dataclass(frozen=True)
class ClassPolicy:
    """Decides whether an Ingress belongs to this controller.

    ``served`` is ``--ingress-class``; ``ingress_class`` is that IngressClass
    object when it exists (it may be absent in manifests mode).
    """

    served: str
    ingress_class: IngressClass | None

    def accepts(self, class_name: str | None) -> bool:
        if class_name is None:
            return self.ingress_class is not None and self.ingress_class.is_default
        return class_name == self.served


def raw_class_name(obj: Mapping[str, Any]) -> str | None:
    """The class an unvalidated Ingress asks for: field first, then legacy annotation."""
    spec = obj.get("spec")
    if isinstance(spec, Mapping) and isinstance(spec.get("ingressClassName"), str):
        return str(spec["ingressClassName"])
    md = obj.get("metadata")
    ann = md.get("annotations") if isinstance(md, Mapping) else None
    if isinstance(ann, Mapping) and "kubernetes.io/ingress.class" in ann:
        return str(ann["kubernetes.io/ingress.class"])
    return None
