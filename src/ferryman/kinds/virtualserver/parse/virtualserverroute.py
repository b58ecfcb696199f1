"""k8s.nginx.org/v1 VirtualServerRoute: typed view, NIC's validation, and its check against a VS.

A VirtualServerRoute is valid or not on its own (``parse_virtual_server_route``)
and again for each VirtualServer that hands paths over to it
(``check_for_virtual_server``): its host must be the VirtualServer's and its
subroutes must lie under the delegating paths (``kinds/virtualserver/records/delegation.py``
applies both).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ferryman.kinds.virtualserver.parse.route import Route, parse_routes, split_path
from ferryman.kinds.virtualserver.parse.virtualserver import parse_host
from ferryman.resources.meta import Meta
from ferryman.resources.nic_fields import (
    Context,
    Obj,
    Parsed,
    Problem,
    invalid,
    parse_object_meta,
)
from ferryman.resources.nic_upstream import Upstream, parse_upstreams

KIND = "VirtualServerRoute"
SPEC_KEYS = frozenset({"ingressClassName", "host", "upstreams", "subroutes"})


@dataclass(frozen=True)
class VirtualServerRoute:
    meta: Meta
    ingress_class: str
    host: str
    upstreams: tuple[Upstream, ...]
    subroutes: tuple[Route, ...]


def parse_virtual_server_route(
    obj: Mapping[str, Any], context: Context | None = None
) -> Parsed[VirtualServerRoute]:
    """Validate a raw VirtualServerRoute on its own, as NIC does before any VS refers to it."""
    ctx = context or Context()  # a test passes its own to see which fields are read
    meta = parse_object_meta(obj, ctx)
    spec = Obj.root(ctx, obj.get("spec"), "spec", SPEC_KEYS)
    if spec is None or meta is None:
        return Parsed(None, tuple(ctx.problems))
    ingress_class = spec.text("ingressClassName")
    host = parse_host(spec)
    upstreams, names = parse_upstreams(spec)
    subroutes: tuple[Route, ...] = ()
    if not _mixed_categories(spec):
        subroutes = parse_routes(spec, "subroutes", frozenset(names), meta.namespace)
    if ctx.problems:
        return Parsed(None, tuple(ctx.problems))
    return Parsed(VirtualServerRoute(meta, ingress_class, host, upstreams, subroutes), ())


def _mixed_categories(spec: Obj) -> bool:
    """NIC: every subroute uses the same kind of path modifier (checked first, alone)."""
    raw = spec.raw.get("subroutes")
    paths = [
        (i, r["path"])
        for i, r in enumerate(raw if isinstance(raw, list) else ())
        if isinstance(r, Mapping) and isinstance(r.get("path"), str)
    ]
    if len(paths) < 2 or paths[0][0] != 0:
        return False
    first = split_path(paths[0][1]).category
    mixed = False
    for i, path in paths[1:]:
        category = split_path(path).category
        if category != first:
            spec.ctx.add(
                invalid(
                    f"spec.subroutes[{i}].path",
                    path,
                    "all subroutes must use the same path modifier type; "
                    f"got '{first}' and '{category}'",
                )
            )
            mixed = True
    return mixed


def check_for_virtual_server(
    vsr: VirtualServerRoute, vs_host: str, vs_paths: tuple[str, ...]
) -> list[Problem]:
    """NIC's rules for a valid VirtualServerRoute that a VirtualServer delegates ``vs_paths`` to.

    ``vs_paths`` are the delegating routes' paths (``VirtualServer.delegating_paths``):
    one prefix or exact path, or one or more regular expressions.
    """
    problems = []
    if vsr.host != vs_host:
        problems.append(invalid("spec.host", vsr.host, f"must be equal to '{vs_host}'"))
    if not vs_paths:
        return problems
    wanted = [str(split_path(p)) for p in vs_paths]
    if len(vs_paths) > 1 and not all(p.startswith("~") for p in wanted):
        message = "multiple VS route paths are only supported for regex routes"
        return [*problems, invalid("spec.subroutes", "subroutes", message)]
    first = wanted[0]
    subroutes = [str(r.path) for r in vsr.subroutes]
    if first.startswith("="):
        if len(subroutes) != 1:
            message = "must have only one subroute if exact match is being used"
            return [*problems, invalid("spec.subroutes", "subroutes", message)]
        if subroutes[0] != first:
            message = (
                "must have the same path as the referenced VirtualServer route path "
                f"'{vs_paths[0]}'"
            )
            problems.append(invalid("spec.subroutes[0].path", subroutes[0], message))
        return problems
    if first.startswith("~"):
        for path, shown in zip(wanted, vs_paths, strict=True):
            if path not in subroutes:
                message = (
                    f"subroute with path '{shown}' is missing; all VS route paths must be "
                    "covered by VSR subroutes"
                )
                problems.append(invalid("spec.subroutes", "subroutes", message))
        for i, path in enumerate(subroutes):
            if path not in wanted:
                message = (
                    f"subroute path '{path}' is not referenced by any VS route; all VSR "
                    "subroutes must be referenced"
                )
                problems.append(invalid(f"spec.subroutes[{i}].path", path, message))
        return problems
    for i, path in enumerate(subroutes):
        if not path.startswith(first):
            problems.append(
                invalid(f"spec.subroutes[{i}].path", path, f"must start with '{vs_paths[0]}'")
            )
    return problems
