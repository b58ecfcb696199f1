"""gateway.networking.k8s.io/v1beta1 ReferenceGrant: which objects of other
namespaces may refer to objects in the grant's namespace.

Shared vocabulary rather than the Gateway API kind's own: Gateway API's
attachment (``kinds/gateway/records/attach.py``) asks a grant whether it allows a
cross-namespace reference, and so does every kind's tenant mode
(``configs/tenancy.py``, through ``engine/reads.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ferryman.resources.meta import Meta
from ferryman.resources.nic_fields import Context, Obj, Parsed, parse_object_meta, required


@dataclass(frozen=True)
class GrantFrom:
    group: str
    kind: str
    namespace: str


@dataclass(frozen=True)
class GrantTo:
    group: str
    kind: str
    name: str | None  # None: every object of that kind


@dataclass(frozen=True)
class ReferenceGrant:
    meta: Meta
    sources: tuple[GrantFrom, ...]
    targets: tuple[GrantTo, ...]

    def allows(
        self, group: str, kind: str, namespace: str, to_group: str, to_kind: str, name: str
    ) -> bool:
        """Whether an object of (group, kind) in ``namespace`` may refer to the
        (to_group, to_kind) object ``name`` in this grant's namespace."""
        return any(f == GrantFrom(group, kind, namespace) for f in self.sources) and any(
            (t.group, t.kind) == (to_group, to_kind) and t.name in (None, name)
            for t in self.targets
        )


def parse_reference_grant(obj: Mapping[str, Any]) -> Parsed[ReferenceGrant]:
    ctx = Context()
    meta = parse_object_meta(obj, ctx)
    spec = Obj.root(ctx, obj.get("spec"), "spec", frozenset({"from", "to"}))
    if spec is None or meta is None:
        return Parsed(None, tuple(ctx.problems))
    sources = tuple(
        GrantFrom(f.text("group"), f.text("kind"), f.text("namespace"))
        for f in spec.objs("from", frozenset({"group", "kind", "namespace"}))
    )
    targets = tuple(
        GrantTo(t.text("group"), t.text("kind"), t.text("name") or None)
        for t in spec.objs("to", frozenset({"group", "kind", "name"}))
    )
    if not sources:
        ctx.add(required("spec.from"))
    if not targets:
        ctx.add(required("spec.to"))
    if ctx.problems:
        return Parsed(None, tuple(ctx.problems))
    return Parsed(ReferenceGrant(meta, sources, targets), ())
