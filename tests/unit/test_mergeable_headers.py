"""nginx.org/proxy-set-headers on mergeable Ingresses: the master's entries reach
every minion, the minion's are added, and the minion's value wins for a name
both set (NIC's mergeable rules; names compared case aside)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ferryman.kinds.ingress.records.mergeable import combined_headers


def test_master_alone_is_inherited() -> None:
    assert combined_headers("X-A: 1, X-B", None) == "X-A: 1, X-B"


def test_minion_adds_and_overrides_case_aside() -> None:
    assert combined_headers("X-A: 1, X-B: m", "x-b: t, X-C") == "X-A: 1,x-b: t, X-C"
    assert combined_headers("X-A: 1", "x-a: 2") == "x-a: 2"


_NAMES = st.sampled_from(["X-A", "x-a", "X-B", "Y", "y"])


@given(st.lists(_NAMES, min_size=1, max_size=4), st.lists(_NAMES, min_size=1, max_size=4))
def test_every_name_is_set_once_by_whoever_wins(master: list[str], minion: list[str]) -> None:
    combined = combined_headers(
        ",".join(f"{n}: m" for n in master), ",".join(f"{n}: t" for n in minion)
    )
    entries = [e.strip() for e in combined.split(",")]
    theirs = {n.lower() for n in minion}
    for entry in entries:
        name, _, value = entry.partition(": ")
        assert value == ("t" if name.lower() in theirs else "m")
    assert {e.partition(":")[0].lower() for e in entries} == {n.lower() for n in master + minion}
