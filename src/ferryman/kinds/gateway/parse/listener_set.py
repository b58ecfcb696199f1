"""gateway.networking.k8s.io/v1 ListenerSet (standard channel since v1.5):
listeners a Gateway takes from another object, by its parentRef, when the
Gateway's allowedListeners admit the ListenerSet's namespace
(records/listener_sets.py merges them).

Its listeners are a Gateway's listeners field for field, so they go through
the Gateway's own listener parser (``parse_listener``): every value reaching
NGINX is checked by the same rules. The CRD's own rules checked here too (for
manifests mode): one to 64 listeners, unique names, unique port, protocol and
hostname, a parentRef naming a Gateway.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ferryman.kinds.gateway.parse.gateway_api import GROUP, Listener, parse_listeners
from ferryman.resources.meta import Meta
from ferryman.resources.nic_fields import (
    Context,
    Obj,
    Parsed,
    invalid,
    parse_object_meta,
    required,
)
from ferryman.resources.validation import dns1123_subdomain


@dataclass(frozen=True)
class ListenerSet:
    meta: Meta
    # spec.parentRef: the Gateway's namespace (the ListenerSet's by default) and name.
    parent_namespace: str
    parent_name: str
    listeners: tuple[Listener, ...]


def parse_listener_set(obj: Mapping[str, Any]) -> Parsed[ListenerSet]:
    ctx = Context()
    meta = parse_object_meta(obj, ctx)
    spec = Obj.root(ctx, obj.get("spec"), "spec", frozenset({"parentRef", "listeners"}))
    if spec is None or meta is None:
        return Parsed(None, tuple(ctx.problems))
    parent = spec.obj("parentRef", frozenset({"group", "kind", "name", "namespace"}))
    namespace, name = meta.namespace, ""
    if parent is None:
        ctx.add(required("spec.parentRef"))
    else:
        group = parent.text("group") if parent.has("group") else GROUP
        kind = parent.text("kind") or "Gateway"
        if (group, kind) != (GROUP, "Gateway"):
            ctx.add(invalid(parent.at("kind"), f"{group}/{kind}", "must be a Gateway"))
        name = parent.text("name")
        namespace = parent.text("namespace") or meta.namespace
        for key, value in (("name", name), ("namespace", namespace)):
            if (why := dns1123_subdomain(value)) is not None:
                ctx.add(invalid(parent.at(key), value, why))
    listeners = parse_listeners(spec)
    if ctx.problems:
        return Parsed(None, tuple(ctx.problems))
    return Parsed(ListenerSet(meta, namespace, name, tuple(listeners)), ())


def owner(lst: Listener) -> tuple[str, str] | None:
    """The ListenerSet (namespace, name) a Gateway's listener came from; None
    for the Gateway's own."""
    return (lst.origin.namespace, lst.origin.name) if lst.origin else None


def section(lst: Listener) -> str:
    """The listener's name as a route's parentRef sectionName gives it (a
    merged ListenerSet listener's ``name`` is unique within the Gateway only)."""
    return lst.origin.section if lst.origin else lst.name
