"""Desired's virtual hosts by writer: a render drops the hosts it wrote (but
those it keeps), never another's, and finds them without scanning every
host: at start-up each of N Ingresses renders once, so a scan made start-up
quadratic (10,000 Ingresses: 26 s of CPU, bench.run --scenarios startup)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferryman.configs.model import VirtualHost
from ferryman.engine.secrets import SecretStore
from ferryman.engine.settings import Settings
from ferryman.engine.store import Store
from ferryman.resources.meta import ObjectRef
from ferryman.translators.desired import Desired
from ferryman.wire.records import Record


def _desired() -> Desired:
    return Desired(Settings(state_dir=Path("/nonexistent")), Store(), SecretStore())


def _ref(i: int) -> ObjectRef:
    return ObjectRef("Ingress", "default", f"app{i}")


def _hosts(d: Desired) -> dict[str, ObjectRef | None]:
    return {k[1]: d.writer_of(k[1]) for k in d.records if k[0] == Record.HOST}


@given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 9)), max_size=40),
    st.integers(0, 4),
    st.sets(st.integers(0, 9)),
)
def test_a_writer_drops_its_own_hosts_but_those_it_keeps(
    writes: list[tuple[int, int]], dropper: int, keep: set[int]
) -> None:
    d = _desired()
    writer: dict[str, ObjectRef] = {}
    for who, host in writes:  # a later writer takes a host over
        name = f"h{host}.test"
        d.write_host(_ref(who), VirtualHost(name, (), None), None)
        writer[name] = _ref(who)
    d.drop_hosts_of(_ref(dropper), keep=[f"h{k}.test" for k in keep])
    expected = {h: w for h, w in writer.items() if w != _ref(dropper) or int(h[1:-5]) in keep}
    assert _hosts(d) == expected


def test_dropping_one_writers_hosts_does_not_look_at_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    d = _desired()
    for i in range(2000):
        d.write_host(_ref(i), VirtualHost(f"app{i}.test", (), None), None)
    compared = 0
    equal = ObjectRef.__eq__

    def counting(self: ObjectRef, other: object) -> bool:
        nonlocal compared
        compared += 1
        return equal(self, other)

    monkeypatch.setattr(ObjectRef, "__eq__", counting)
    d.drop_hosts_of(_ref(7))
    assert compared < 10  # the old scan compared every host's writer: 2,000
    monkeypatch.undo()
    assert "app7.test" not in _hosts(d) and len(_hosts(d)) == 1999
