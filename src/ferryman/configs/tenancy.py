"""Tenant mode (``--allowed-host-suffixes``): what one namespace may make of
another's hosts and objects.

NIC trusts every namespace: a mergeable minion joins any master's host, a
VirtualServerRoute of any namespace serves under any VirtualServer that
selects it, and a VirtualServer may name another namespace's Service
(``service: ns/name``) or Policy. With a host policy that trust would undo the
policy, so in tenant mode:

- a minion or VirtualServerRoute contributes to a host only when its own
  namespace is allowed that host (``HostRules``, ``Configuration``);
- a reference into another namespace is followed only when a ReferenceGrant
  in the target namespace allows it, as Gateway API does (``Grants``). The
  grant's ``from`` is the referring resource (``FROM_GROUP`` by kind), its
  ``to`` the object referred to (``SERVICE``, ``POLICY``).

Without a host policy nothing here refuses anything: NIC's behaviour, the
exposure docs/operations.md "Host policy" describes.
"""

from __future__ import annotations

from typing import Protocol

FLAG = "--allowed-host-suffixes"
NIC_GROUP = "k8s.nginx.org"
# The group a ReferenceGrant's ``from`` names for each referring kind.
FROM_GROUP = {
    "Ingress": "networking.k8s.io",
    "VirtualServer": NIC_GROUP,
    "VirtualServerRoute": NIC_GROUP,
    "Policy": NIC_GROUP,
}
# The backend a refused Service reference proxies to: no Service has it (a
# namespace is a DNS label), so it has no endpoints and answers 503, as
# ferryman answers for a missing Service.
REFUSED = "-/refused:0"
# What a ReferenceGrant's ``to`` names: (group, kind).
SERVICE = ("", "Service")
SECRET = ("", "Secret")
POLICY = (NIC_GROUP, "Policy")


class HostRules(Protocol):
    def allows(self, namespace: str, host: str) -> bool:
        """Whether ``namespace`` may serve ``host``: always outside tenant mode."""
        ...


class Grants(Protocol):
    def granted(
        self, from_kind: str, from_namespace: str, to: tuple[str, str], namespace: str, name: str
    ) -> bool:
        """Whether a ``from_kind`` in ``from_namespace`` may refer to the ``to``
        object namespace/name: always outside tenant mode and within one namespace."""
        ...


def host_denied(namespace: str, host: str) -> str:
    """Why a namespace's minion or VirtualServerRoute adds nothing to ``host``."""
    return f"host {host or '(any host)'} is not allowed in namespace {namespace} ({FLAG})"


def refused(
    from_kind: str, from_namespace: str, to: tuple[str, str], namespace: str, name: str
) -> str:
    """A refused reference and the ReferenceGrant that would allow it."""
    group, kind = to
    shown = group or '""'
    return (
        f"{kind} {namespace}/{name} is in another namespace: {FLAG} needs a ReferenceGrant "
        f"in namespace {namespace} from {{group: {FROM_GROUP[from_kind]}, kind: {from_kind}, "
        f"namespace: {from_namespace}}} to {{group: {shown}, kind: {kind}, name: {name}}} "
        "(name optional)"
    )


def check(
    grants: Grants,
    from_kind: str,
    from_namespace: str,
    to: tuple[str, str],
    namespace: str,
    name: str,
) -> str | None:
    """None when the reference may be followed, else why not (``refused``)."""
    if namespace == from_namespace or grants.granted(
        from_kind, from_namespace, to, namespace, name
    ):
        return None
    return refused(from_kind, from_namespace, to, namespace, name)
