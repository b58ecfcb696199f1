"""A reference to an NIC Policy (k8s.nginx.org/v1): what a VirtualServer's
``policies`` and an Ingress's ``nginx.org/policies`` name, and the Policy kind
resolves (kinds/policy/records/attach.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PolicyRef:
    name: str
    namespace: str  # the referring resource's namespace when the reference names none
