"""Policies as another kind's translation reads them (``PolicyReads``): one
parse per Policy, shared by every Ingress and VirtualServer that attaches it
(``ParsedPolicies``, one per engine cache, until the Policy changes), each read
recorded so the Policy's change translates its readers again."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ferryman.configs.secret_state import SecretRead
from ferryman.engine.reads import Reads
from ferryman.engine.store import Store
from ferryman.kinds.policy.parse.policy import Policy, parse_policy
from ferryman.resources.meta import ObjectRef

KIND = "Policy"


class ParsedPolicies:
    """Policies parsed (None: missing or invalid), until they change."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._policies: dict[tuple[str, str], Policy | None] = {}

    def policy(self, namespace: str, name: str) -> Policy | None:
        key = (namespace, name)
        if key not in self._policies:
            obj = self._store.get(KIND, namespace, name)
            self._policies[key] = None if obj is None else parse_policy(obj).resource
        return self._policies[key]

    def forget(self, ref: ObjectRef) -> None:
        if ref.kind == KIND:
            self._policies.pop((ref.namespace, ref.name), None)


class PolicyReading:
    """``PolicyReads`` over one translation's ``Reads``."""

    def __init__(self, reads: Reads) -> None:
        self._reads = reads

    def policy(self, namespace: str, name: str) -> Policy | None:
        """The Policy, parsed and valid; None when it is missing or invalid."""
        self._reads.depend(ObjectRef(KIND, namespace, name))
        return self._reads.derived(ParsedPolicies).policy(namespace, name)

    def granted(
        self, from_kind: str, from_namespace: str, to: tuple[str, str], namespace: str, name: str
    ) -> bool:
        return self._reads.granted(from_kind, from_namespace, to, namespace, name)

    def secret_read(
        self, namespace: str, name: str, parser: Callable[[Mapping[str, Any]], Any]
    ) -> SecretRead[Any]:
        return self._reads.secret_read(namespace, name, parser)
