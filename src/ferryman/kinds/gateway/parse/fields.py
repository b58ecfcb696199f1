"""Field types and patterns the Gateway API's kinds share (gateway-api v1.6
apis/v1/shared_types.go): hostnames, header names, paths, object references and
GEP-2257 Durations.

They sit apart from the kinds' parsers so that a Gateway's listeners, an
HTTPRoute's rules and the route's filters (``gateway_filters``) check a field
by the same pattern without importing one another.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ferryman.resources.nic_fields import Obj, invalid, required

# The CRDs' patterns (gateway-api v1.6 apis/v1/shared_types.go).
HOSTNAME_RE = re.compile(
    r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
HEADER_NAME_RE = re.compile(r"^[A-Za-z0-9!#$%&'*+\-.^_`|~]+$")
_KIND_RE = re.compile(r"^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$")
_GROUP_RE = re.compile(r"^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# A path as HTTPRoute's CEL rules allow it for Exact and PathPrefix.
PATH_RE = re.compile(r"^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|%[0-9a-fA-F]{2})+$")
# GEP-2257's Duration: 1 to 4 numbers of up to 5 digits, each with its unit.
_DURATION_RE = re.compile(r"^([0-9]{1,5}(h|m|s|ms)){1,4}$")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


@dataclass(frozen=True)
class ObjectReference:
    """A certificateRef or backendRef: group "" is the core group."""

    group: str
    kind: str
    name: str
    namespace: str | None  # None: the referring object's namespace


def parse_reference(o: Obj, default_kind: str, default_group: str = "") -> ObjectReference:
    group = o.text("group") if o.has("group") else default_group
    kind = o.text("kind") if o.has("kind") else default_kind
    name = o.text("name")
    if not name or len(name) > 253:
        o.ctx.add(invalid(o.at("name"), name, "must be 1 to 253 characters"))
    if not _GROUP_RE.fullmatch(group):
        o.ctx.add(invalid(o.at("group"), group, "must be a DNS subdomain or empty"))
    if not _KIND_RE.fullmatch(kind):
        o.ctx.add(invalid(o.at("kind"), kind, "must be a kind name"))
    namespace = o.text("namespace") or None
    return ObjectReference(group, kind, name, namespace)


def parse_duration(o: Obj, key: str) -> float | None:
    """A Duration field in seconds (None when absent)."""
    if not o.has(key):
        return None
    text = o.text(key)
    if not _DURATION_RE.fullmatch(text):
        o.ctx.add(invalid(o.at(key), text, "must be a Gateway API Duration such as 500ms or 1h2m"))
        return None
    return sum(float(n) * _UNITS[u] for n, u in re.findall(r"([0-9]+)(ms|h|m|s)", text))


def allowed_listeners(spec: Obj) -> tuple[str, Mapping[str, Any] | None]:
    """A Gateway's ``spec.allowedListeners.namespaces``: from (the CRD's default None) and
    the selector."""
    allowed = spec.obj("allowedListeners", frozenset({"namespaces"}))
    ns = allowed.obj("namespaces", frozenset({"from", "selector"})) if allowed else None
    if ns is None:
        return "None", None
    from_ = ns.text("from") or "None"
    if from_ not in ("All", "Same", "Selector", "None"):
        ns.ctx.add(invalid(ns.at("from"), from_, "must be All, Same, Selector or None"))
    raw = ns.raw.get("selector")
    selector = raw if isinstance(raw, Mapping) else None
    if from_ == "Selector" and selector is None:
        ns.ctx.add(required(ns.at("selector"), "selector must be set when from is Selector"))
    return from_, selector
