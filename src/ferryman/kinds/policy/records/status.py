"""A Policy's own status and Event, as NIC's syncPolicy writes them.

NIC reports on every Policy of its class when it changes, used or not:
``Valid``/``AddedOrUpdated`` "Policy ns/name was added or updated", or
``Invalid``/``Rejected`` "Policy ns/name is invalid and was rejected: <the
validation's problems>". Whether a VirtualServer can use it is reported on
the VirtualServer (``vs_policies``), never here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from ferryman.kinds.policy.parse.policy import parse_policy

VALID, INVALID = "Valid", "Invalid"
ADDED_OR_UPDATED, REJECTED = "AddedOrUpdated", "Rejected"


class PolicyStatus(NamedTuple):
    state: str
    reason: str
    message: str


def policy_status(obj: Mapping[str, Any], served_class: str) -> PolicyStatus | None:
    """None when the Policy names another ingress class (not ferryman's to report)."""
    spec = obj.get("spec")
    cls = spec.get("ingressClassName") if isinstance(spec, Mapping) else None
    if isinstance(cls, str) and cls not in ("", served_class):
        return None
    md = obj.get("metadata") or {}
    who = f"{md.get('namespace', '')}/{md.get('name', '')}"
    parsed = parse_policy(obj)
    if parsed.resource is None:
        message = f"Policy {who} is invalid and was rejected: {parsed.message()}"
        return PolicyStatus(INVALID, REJECTED, message)
    return PolicyStatus(VALID, ADDED_OR_UPDATED, f"Policy {who} was added or updated")
