"""Contributors left out of their owner's records, for ``--max-record-bytes``
(``configs/record_shares.py`` decides which) or because NGINX's memory had no
room (``Refusals``), and who has to hear about it.

Each owner's render says which of its contributors it left out this time;
``Exclusions`` keeps that per owner, so a contributor is told it is rejected
while it is left out and rendered again (told it serves) as soon as its owner
takes it back, is deleted or rejected.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, TypeVar

from ferryman.configs.record_shares import Excluded, fit
from ferryman.resources.meta import ObjectRef

C = TypeVar("C")
R = TypeVar("R")


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


class Refusals(Generic[C]):
    """Contributors left out because NGINX's memory refused their owner's host
    record: the owner sheds its largest share (``shrink``, then rendered again)
    rather than being rejected, and a contributor left out so is tried again
    when it changes (or its owner is rendered without it and sheds nothing)."""

    def __init__(self, name: Callable[[C], str]) -> None:
        self._name = name
        self._by_owner: dict[ObjectRef, dict[str, tuple[C, str]]] = {}
        self._shrink: dict[ObjectRef, str] = {}
        self.shed = False  # the last shrink left something out

    def forget(self, owner: ObjectRef) -> None:
        """``owner`` has no contributors any more (deleted, rejected, host lost)."""
        self._by_owner.pop(owner, None)
        self._shrink.pop(owner, None)

    def shrink(self, owner: ObjectRef, why: str) -> None:
        """At ``owner``'s next render, leave out its largest share for ``why``."""
        self._shrink[owner] = why
        self.shed = False

    def split(self, owner: ObjectRef, contributors: Sequence[C]) -> tuple[list[C], dict[str, str]]:
        """The contributors to try, and those still left out (name -> why): the
        ones unchanged since they were."""
        old = self._by_owner.pop(owner, {})
        current = {self._name(c): c for c in contributors}
        kept = {n: (c, why) for n, (c, why) in old.items() if current.get(n) == c}
        if kept:
            self._by_owner[owner] = kept
        tried = [c for c in contributors if self._name(c) not in kept]
        return tried, {n: why for n, (_, why) in kept.items()}

    def shrunk(
        self,
        owner: ObjectRef,
        contributors: Sequence[C],
        render: Callable[[Sequence[C]], R],
        size: Callable[[R], int],
        rendered: R,
    ) -> tuple[R, dict[str, str]]:
        """``rendered`` (of ``contributors``) without its largest share when
        ``owner`` is to shrink, and who was left out (name -> why)."""
        why = self._shrink.pop(owner, None)
        if why is None:
            return rendered, {}
        fitted = fit(contributors, render, size, size(rendered) - 1, self._name)
        out: dict[str, str] = {}
        for e in fitted.excluded:
            name = self._name(e.contributor)
            self._by_owner.setdefault(owner, {})[name] = (e.contributor, why)
            out[name] = why
        self.shed = bool(out)
        return fitted.rendered, out

    def fit(
        self,
        owner: ObjectRef,
        contributors: Sequence[C],
        render: Callable[[Sequence[C]], R],
        size: Callable[[R], int],
        limit: int,
        what: str,
        host: str,
    ) -> tuple[R, dict[str, str]]:
        """``owner``'s records with the contributors that fit: those whose
        ``what`` (e.g. "its paths") would make ``host``'s record larger than
        ``limit`` are left out, as are those NGINX's memory refused; and who
        was left out (name -> why)."""
        tried, refused = self.split(owner, contributors)
        fitted = fit(tried, render, size, limit, self._name)
        record = f"the record of the virtual host {host}"
        why = {
            self._name(e.contributor): too_large(what, record, e, limit) for e in fitted.excluded
        }
        kept = [c for c in tried if self._name(c) not in why]
        out, shed = self.shrunk(owner, kept, render, size, fitted.rendered)
        for name, refusal in (refused | shed).items():
            why[name] = f"with {what}, the virtual host {host} {refusal}; served without them"
        return out, why
