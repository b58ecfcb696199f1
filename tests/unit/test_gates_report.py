"""ferryman.gates.report: the applied-pods annotation each replica publishes."""

from __future__ import annotations

import datetime
import json

from hypothesis import given
from hypothesis import strategies as st
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease

from ferryman.gates.decide import PodKey, live_replicas
from ferryman.gates.report import REPORT_PREFIX, decode, encode, lease_name, report_of

names = st.from_regex(r"[a-z0-9]([a-z0-9.-]{0,20}[a-z0-9])?", fullmatch=True)
keys = st.builds(PodKey, names, names, st.uuids().map(str))


@given(st.frozensets(keys, max_size=20))
def test_what_a_replica_publishes_reads_back_the_same(applied: frozenset[PodKey]) -> None:
    assert decode(encode(applied)) == applied


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=10,
)


@given(st.text(max_size=50) | json_values.map(json.dumps))
def test_whatever_the_annotation_holds_only_whole_pod_keys_come_out(text: str) -> None:
    assert all(isinstance(k, PodKey) and all(k) and "/" not in "".join(k) for k in decode(text))


def test_malformed_entries_are_left_out() -> None:
    text = '["ns/web-1/u1", "ns/web-2", 3, "a//b", "ns/web-3/u3/extra"]'
    assert decode(text) == {PodKey("ns", "web-1", "u1")}
    assert decode('{"ns/web-1/u1": true}') == frozenset()
    assert decode(None) == frozenset()


@given(st.frozensets(keys, max_size=30), st.integers(2, 2000))
def test_a_report_too_large_is_cut_short_never_over_the_limit(
    applied: frozenset[PodKey], limit: int
) -> None:
    text = encode(applied, limit)
    assert len(text) <= limit
    kept = decode(text)
    assert kept <= applied
    # What is left out comes after what is kept, in name order.
    names = sorted("/".join(k) for k in applied)
    assert sorted("/".join(k) for k in kept) == names[: len(kept)]


def _lease(name: str, holder: str, renewed: datetime.datetime, duration: int) -> Lease:
    return Lease(
        metadata=ObjectMeta(name=name),
        spec=LeaseSpec(holderIdentity=holder, renewTime=renewed, leaseDurationSeconds=duration),
    )


def test_only_report_leases_named_for_their_holder_are_reports() -> None:
    now = datetime.datetime.now(datetime.UTC)
    name = lease_name("ferryman-leader-election", "pod-a")
    assert name.startswith(REPORT_PREFIX)
    assert report_of(_lease(name, "pod-a", now, 30)) is not None
    # The leader lock, or any other Lease carrying the label, is no report.
    assert report_of(_lease("ferryman-leader-election", "pod-a", now, 30)) is None
    assert report_of(_lease(name, "pod-b", now, 30)) is None


def test_a_report_lasts_no_longer_than_the_installations_leases() -> None:
    now = datetime.datetime.now(datetime.UTC)
    forged = _lease(lease_name("lock", "x"), "x", now, 10 * 365 * 86400)
    report = report_of(forged, longest=30)
    assert report is not None and report.duration == 30
    assert not live_replicas([report], now.timestamp() + 31)
