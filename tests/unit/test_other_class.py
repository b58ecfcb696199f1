"""Resources of another class: said once per object and class, forgotten when served or deleted."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from ferryman.engine.kind_spec import KindSpec, ready_counts
from ferryman.engine.settings import Settings
from ferryman.resources.meta import ObjectRef
from ferryman.translators.other_class import OtherClass

REFS = st.sampled_from(
    [ObjectRef("Ingress", "default", "a"), ObjectRef("VirtualServer", "default", "a")]
)
# (ref, the class it names (None: none), whether ferryman serves it)
STEPS = st.lists(st.tuples(REFS, st.sampled_from([None, "nginx", "other"]), st.booleans()))


@given(STEPS)
def test_said_exactly_when_the_skipped_class_is_new(
    steps: list[tuple[ObjectRef, str | None, bool]],
) -> None:
    memo = OtherClass()
    last: dict[ObjectRef, str] = {}  # the model: what was last said of each, while skipped
    for ref, cls, served in steps:
        expected = not served and last.get(ref) != (cls or "")
        if served:
            last.pop(ref, None)
        else:
            last[ref] = cls or ""
        assert memo.checked(ref, cls, served) == expected
        assert len(memo) == len(last)  # bounded: only the objects skipped now
    assert sum(memo.counts().values()) == len(last)


def test_resyncs_say_nothing_again_and_deletion_forgets() -> None:
    memo = OtherClass()
    ref = ObjectRef("Ingress", "default", "cafe")
    assert memo.checked(ref, "nginx", False)
    assert not any(memo.checked(ref, "nginx", False) for _ in range(5))
    assert memo.lines("ferryman") == [
        "skipped: Ingress default/cafe: class nginx, ferryman serves ferryman; set "
        "spec.ingressClassName: ferryman or run ferryman with --ingress-class=nginx"
    ]
    assert not memo.checked(ref, None, True)  # deleted
    assert len(memo) == 0
    assert memo.checked(ref, "nginx", False)  # created again: said again


def test_ready_counts_every_counted_kind_less_those_of_another_class() -> None:
    specs = (
        KindSpec("Ingress", "networking.k8s.io", "v1", "ingresses"),
        KindSpec("IngressClass", "networking.k8s.io", "v1", "ingressclasses", counted=False),
        KindSpec("VirtualServer", "k8s.nginx.org", "v1", "virtualservers"),
        KindSpec("Gateway", "gateway.networking.k8s.io", "v1", "gateways", enabled=lambda s: False),
    )
    stored = {"Ingress": 3, "IngressClass": 1, "VirtualServer": 2, "Gateway": 4}
    counts = ready_counts(
        specs, Settings(state_dir=Path("/nonexistent")), stored.__getitem__, {"Ingress": 1}
    )
    assert list(counts.items()) == [("ingresses", 2), ("virtualservers", 2), ("other_class", 1)]


def test_a_reason_of_its_own_is_kept_and_listed() -> None:
    o = OtherClass()
    ref = ObjectRef("Gateway", "default", "gw")
    assert o.checked(ref, "istio", False, "GatewayClass istio is istio.io/x's")
    assert not o.checked(ref, "istio", False, "GatewayClass istio is istio.io/x's")
    assert o.checked(ref, "istio", False, "GatewayClass istio does not exist (or is invalid)")
    assert o.lines("ferryman") == [
        "skipped: Gateway default/gw: GatewayClass istio does not exist (or is invalid)"
    ]
