"""What a policy translation may read, as the pure core sees it.

``kinds/policy/translate/reads.py::PolicyReading`` (a layer above) implements
``PolicyReads`` over the engine's ``Reads``, which records every read for the
dependency index, so a Policy or Secret read here re-translates its reader when
it changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ferryman.configs.secret_state import SecretRead
from ferryman.kinds.policy.parse.policy import Policy


class PolicyReads(Protocol):
    def policy(self, namespace: str, name: str) -> Policy | None: ...

    def granted(
        self, from_kind: str, from_namespace: str, to: tuple[str, str], namespace: str, name: str
    ) -> bool: ...

    def secret_read(
        self, namespace: str, name: str, parser: Callable[[Mapping[str, Any]], Any]
    ) -> SecretRead[Any]: ...
