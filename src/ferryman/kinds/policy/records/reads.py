"""What a policy translation may read, as the pure core sees it.

``reads.Reads`` (a layer above) implements ``PolicyReads`` and records every
read for the dependency index, so a Policy or Secret read here re-translates
its reader when it changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from ferryman.kinds.policy.parse.policy import Policy

T = TypeVar("T")


@dataclass(frozen=True)
class SecretRead(Generic[T]):
    """A Secret as one parser reads it."""

    value: T | None
    secret_type: str  # the Secret's type; "" when it is missing
    error: str | None  # why ``value`` is None


class PolicyReads(Protocol):
    def policy(self, namespace: str, name: str) -> Policy | None: ...

    def granted(
        self, from_kind: str, from_namespace: str, to: tuple[str, str], namespace: str, name: str
    ) -> bool: ...

    def secret_read(
        self, namespace: str, name: str, parser: Callable[[Mapping[str, Any]], Any]
    ) -> SecretRead[Any]: ...
