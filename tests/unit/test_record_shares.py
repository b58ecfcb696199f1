"""Which contributors a shared record leaves out to fit --max-record-bytes."""

from __future__ import annotations

import random
from collections.abc import Sequence

from hypothesis import given
from hypothesis import strategies as st

from ferryman.configs.record_shares import Fitted, fit
from ferryman.resources.meta import ObjectRef
from ferryman.translators.record_fit import Exclusions, Refusals

# Contributors by name, each with the bytes it adds to the record.
parts = st.dictionaries(st.text("abcdef", min_size=1, max_size=3), st.integers(0, 100), max_size=8)


def _fit(owner: int, shares: dict[str, int], limit: int, names: Sequence[str]) -> list[str]:
    def render(kept: Sequence[str]) -> int:
        return owner + sum(shares[k] for k in kept)

    fitted = fit(list(names), render, lambda size: size, limit)
    assert fitted.rendered == render([n for n in names if n not in _names(fitted)])
    return _names(fitted)


def _names(fitted: Fitted[str, int]) -> list[str]:
    return [e.contributor for e in fitted.excluded]


@given(st.integers(0, 200), parts, st.integers(0, 500), st.randoms())
def test_the_largest_shares_are_left_out_until_the_record_fits(
    owner: int, shares: dict[str, int], limit: int, rnd: random.Random
) -> None:
    names = sorted(shares)
    out = _fit(owner, shares, limit, names)
    total = owner + sum(shares.values())
    if total <= limit or owner > limit:
        assert out == []  # fits, or the owner's own part does not: the owner pays
        return
    assert owner + sum(shares[n] for n in names if n not in out) <= limit
    # The largest first, by name on a tie, and no more than needed.
    ranked = sorted(names, key=lambda n: (-shares[n], n))
    assert out == ranked[: len(out)]
    assert owner + sum(shares[n] for n in names if n not in out[:-1]) > limit
    # The order the contributors come in does not matter.
    shuffled = list(names)
    rnd.shuffle(shuffled)
    assert _fit(owner, shares, limit, shuffled) == out


@given(st.integers(0, 100), parts, st.integers(0, 300))
def test_what_is_rendered_fits_when_records_do_not_add_up(
    owner: int, shares: dict[str, int], limit: int
) -> None:
    """Several records (H, V, F): the size is the largest, and a contributor
    grows only some of them, so shares overlap; what is rendered still fits."""
    names = sorted(shares)

    def render(kept: Sequence[str]) -> int:
        records = [owner, owner // 2]
        for k in kept:
            records[len(k) % 2] += shares[k]
        return max(records)

    fitted = fit(names, render, lambda size: size, limit)
    if render(names) <= limit or owner > limit:
        assert fitted.excluded == ()
    else:
        assert fitted.rendered <= limit
        assert fitted.rendered == render([n for n in names if n not in _names(fitted)])


def test_a_contributor_hears_when_it_is_left_out_and_taken_back() -> None:
    owner, a, b = (ObjectRef("Ingress", "ns", n) for n in ("master", "a", "b"))
    ex = Exclusions()
    assert ex.set(owner, {a: "too large"}) == {a}
    assert ex.why(a) == "too large" and ex.why(b) is None
    assert ex.set(owner, {a: "too large"}) == set()
    assert ex.set(owner, {b: "too large"}) == {a, b}
    assert ex.why(a) is None
    assert ex.set(owner, {}) == {b}
    assert ex.why(b) is None


def test_no_room_sheds_the_largest_share_until_that_contributor_changes() -> None:
    owner = ObjectRef("VirtualServer", "ns", "cafe")
    refusals: Refusals[tuple[str, int]] = Refusals(lambda c: c[0])
    parts = [("a", 10), ("b", 30), ("c", 20)]

    def render(kept: Sequence[tuple[str, int]]) -> int:
        return 5 + sum(size for _, size in kept)

    assert refusals.shrunk(owner, parts, render, int, 65) == (65, {})  # nothing refused
    refusals.shrink(owner, "does not fit")
    assert refusals.shrunk(owner, parts, render, int, 65) == (35, {"b": "does not fit"})
    assert refusals.shed
    # Left out while unchanged; tried again once it changes.
    assert refusals.split(owner, parts) == ([("a", 10), ("c", 20)], {"b": "does not fit"})
    assert refusals.split(owner, [("a", 10), ("b", 31)]) == ([("a", 10), ("b", 31)], {})
    # An owner with nothing to shed: its own part is what does not fit.
    refusals.shrink(owner, "does not fit")
    assert refusals.shrunk(owner, [], render, int, 5) == (5, {})
    assert not refusals.shed
