"""ferryman.sources.namespaces: with readiness gates and Gateway API both on, the
two Namespace informers keep one store entry per namespace that each reads as
it would alone: every label as the all-namespaces watch has it, the opt-in
label as readiness gates see it (also while an opted-out namespace drains)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ferryman.engine.store import Store
from ferryman.resources.meta import ObjectRef
from ferryman.resources.readiness_gate import INJECT_ENABLED, INJECT_LABEL
from ferryman.sources.namespaces import NamespaceMerge, merged_namespace


class StoreSink:
    def __init__(self) -> None:
        self.store = Store()

    def upsert(self, obj: Mapping[str, Any]) -> None:
        self.store.upsert(obj)

    def delete(self, ref: ObjectRef) -> None:
        self.store.delete(ref)


def ns(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def opted(name: str, **labels: str) -> dict[str, Any]:
    return ns(name, **{INJECT_LABEL: INJECT_ENABLED}, **labels)


def labels(sink: StoreSink, name: str) -> dict[str, str] | None:
    obj = sink.store.get("Namespace", "", name)
    return None if obj is None else dict(obj["metadata"]["labels"])


def test_both_views_share_one_entry() -> None:
    sink = StoreSink()
    merge = NamespaceMerge(sink)
    merge.everything.upsert(ns("plain", team="a"))
    merge.everything.upsert(opted("gated", team="b"))
    assert labels(sink, "plain") == {"team": "a"}
    # Labelled, but the gates have not taken it (yet, or outside --watch-namespace).
    assert labels(sink, "gated") == {"team": "b"}
    merge.gated.upsert(opted("gated", team="b"))
    assert labels(sink, "gated") == {"team": "b", INJECT_LABEL: INJECT_ENABLED}

    # Opted out while pods wait: the all-namespaces watch sees the label go, the
    # gates keep the namespace (draining); the store keeps the opt-in, and new labels.
    merge.everything.upsert(ns("gated", team="c"))
    assert labels(sink, "gated") == {"team": "c", INJECT_LABEL: INJECT_ENABLED}
    merge.gated.delete(ObjectRef("Namespace", "", "gated"))  # drained
    assert labels(sink, "gated") == {"team": "c"}

    # Deleted from the cluster: gone once neither view holds it.
    merge.gated.upsert(opted("gated"))
    merge.everything.delete(ObjectRef("Namespace", "", "gated"))
    assert labels(sink, "gated") == {INJECT_LABEL: INJECT_ENABLED}
    merge.gated.delete(ObjectRef("Namespace", "", "gated"))
    assert labels(sink, "gated") is None
    assert labels(sink, "plain") == {"team": "a"}


def test_pods_pass_through_the_gates_side() -> None:
    sink = StoreSink()
    merge = NamespaceMerge(sink)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "gated"}}
    merge.gated.upsert(pod)
    assert sink.store.get("Pod", "gated", "p") is not None
    merge.gated.delete(ObjectRef("Pod", "gated", "p"))
    assert sink.store.get("Pod", "gated", "p") is None


_labels = st.dictionaries(
    st.sampled_from(["team", "env", INJECT_LABEL]), st.sampled_from(["a", INJECT_ENABLED])
)


@given(every=st.none() | _labels, gated=st.none() | _labels)
def test_the_opt_in_is_the_gates_and_the_rest_the_watchs(
    every: dict[str, str] | None, gated: dict[str, str] | None
) -> None:
    merged = merged_namespace(
        None if every is None else ns("n", **every), None if gated is None else ns("n", **gated)
    )
    if every is None and gated is None:
        assert merged is None
        return
    assert merged is not None
    got = dict(merged["metadata"]["labels"])
    assert got.pop(INJECT_LABEL, None) == (gated or {}).get(INJECT_LABEL)
    rest = every if every is not None else gated or {}
    assert got == {k: v for k, v in rest.items() if k != INJECT_LABEL}
