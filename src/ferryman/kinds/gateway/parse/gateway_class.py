"""gateway.networking.k8s.io/v1 GatewayClass: a typed view with the standard
channel's validation (its controllerName: the CRD's pattern and bound)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ferryman.resources.meta import Meta
from ferryman.resources.nic_fields import (
    Context,
    Obj,
    Parsed,
    invalid,
    parse_object_meta,
    required,
)

_CONTROLLER_RE = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/[A-Za-z0-9\/\-._~%!$&'()*+,;=:]+$"
)


@dataclass(frozen=True)
class GatewayClass:
    meta: Meta
    controller: str


def parse_gateway_class(obj: Mapping[str, Any]) -> Parsed[GatewayClass]:
    ctx = Context()
    meta = parse_object_meta(obj, ctx)
    spec = Obj.root(
        ctx, obj.get("spec"), "spec", frozenset({"controllerName", "parametersRef", "description"})
    )
    controller = spec.text("controllerName") if spec else ""
    if spec is not None:
        if not controller:
            ctx.add(required("spec.controllerName"))
        elif len(controller) > 253 or not _CONTROLLER_RE.fullmatch(controller):
            ctx.add(invalid("spec.controllerName", controller, "must be a domain-prefixed path"))
    if meta is None or ctx.problems:
        return Parsed(None, tuple(ctx.problems))
    return Parsed(GatewayClass(meta, controller), ())
