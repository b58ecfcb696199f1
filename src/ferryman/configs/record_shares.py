"""Which contributors a shared record is assembled without, so it fits
``--max-record-bytes`` (pure).

A host's record is one owner's (a mergeable master, a VirtualServer, a Gateway
listener) plus what others contribute from any namespace (minions,
VirtualServerRoutes, HTTPRoutes). Rejecting the owner for a record grown too
large by one contributor would let any tenant take down another's host, so the
contributors pay first: each one's share is what it adds to the owner's part
alone, and the largest shares (on a tie, the first by name: the answer is
stable) are left out one at a time until the record fits. When the owner's own part does not fit
alone, nothing is left out: the record is refused and its owner rejected, as for
a record without contributors.

The owner's translation renders; this module only decides, from sizes, so the
rule is the same for every kind and costs nothing while records fit: the shares
are measured only for a record over the limit, with one small render per
contributor (the owner's part and that contributor), and the record is rendered
whole again once the shares say it fits (again only when they were short).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

C = TypeVar("C")
R = TypeVar("R")


@dataclass(frozen=True)
class Excluded(Generic[C]):
    """A contributor left out of a record: its share and the record's size with it."""

    contributor: C
    share: int  # bytes it adds to the owner's part alone
    size: int  # the largest record's bytes with every contributor


@dataclass(frozen=True)
class Fitted(Generic[C, R]):
    rendered: R
    excluded: tuple[Excluded[C], ...] = field(default=())


def fit(
    contributors: Sequence[C],
    render: Callable[[Sequence[C]], R],
    size: Callable[[R], int],
    limit: int,
    order: Callable[[C], str] = str,
) -> Fitted[C, R]:
    """``render(contributors)`` if it fits in ``limit``; else rendered without the
    largest shares until it does (``size``: the largest record rendered, in
    bytes; ``order``: a contributor's stable name, for ties)."""
    full = render(contributors)
    if not contributors:
        return Fitted(full)
    full_size = size(full)
    if full_size <= limit:
        return Fitted(full)
    base = size(render(()))
    if base > limit:
        return Fitted(full)
    # Small renders (the owner with one contributor), not N renders of the whole.
    shares = [max(size(render([c])) - base, 0) for c in contributors]
    every = range(len(contributors))
    ranked = sorted(every, key=lambda i: (-shares[i], order(contributors[i])))
    out: set[int] = set()
    excluded: list[Excluded[C]] = []
    estimate = full_size
    for i in ranked:
        out.add(i)
        excluded.append(Excluded(contributors[i], shares[i], full_size))
        estimate -= shares[i]
        if estimate > limit:
            continue  # certainly still too large while shares add up
        rendered = render([contributors[o] for o in every if o not in out])
        if size(rendered) <= limit:
            return Fitted(rendered, tuple(excluded))
        estimate = size(rendered)  # they did not quite: measured from here on
    return Fitted(render(()), tuple(excluded))  # unreachable: the owner alone fits
