"""Contributors left out of their owner's records for ``--max-record-bytes``
(``configs/record_shares.py`` decides which), and who has to hear about it.

Each owner's render says which of its contributors it left out this time;
``Exclusions`` keeps that per owner, so a contributor is told it is rejected
while it is left out and rendered again (told it serves) as soon as its owner
takes it back, is deleted or rejected.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ferryman.configs.record_shares import Excluded
from ferryman.resources.meta import ObjectRef


def largest(values: Iterable[str | None]) -> int:
    """The largest of a host's record values in bytes (None: no such record)."""
    return max((len(v.encode()) for v in values if v), default=0)


def too_large(what: str, record: str, e: Excluded[Any], limit: int) -> str:
    """A left-out contributor's reason: the record, the sizes and the limit."""
    return (
        f"{what} would make {record} {e.size} bytes "
        f"({e.share} of them its own), more than --max-record-bytes {limit}; "
        "served without it"
    )


class Exclusions:
    def __init__(self) -> None:
        self._by_owner: dict[ObjectRef, dict[ObjectRef, str]] = {}
        self._why: dict[ObjectRef, str] = {}  # contributor -> why, of any owner

    def set(self, owner: ObjectRef, excluded: dict[ObjectRef, str]) -> set[ObjectRef]:
        """``owner`` now leaves out exactly ``excluded`` (contributor -> why);
        returns the contributors whose state changed."""
        before = self._by_owner.pop(owner, {})
        if excluded:
            self._by_owner[owner] = excluded
        for c in before:
            self._why.pop(c, None)
        self._why.update(excluded)
        return {c for c in set(before) | set(excluded) if before.get(c) != excluded.get(c)}

    def why(self, contributor: ObjectRef) -> str | None:
        """Why ``contributor`` is left out by some owner (None: it is not)."""
        return self._why.get(contributor)
