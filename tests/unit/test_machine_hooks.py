"""Hooks read from both APIs, and the rule that freezes them once deletion starts."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ferryman.machines.hooks import (
    Hook,
    Hooks,
    annotation_key,
    changed,
    go_list,
    hook_patch,
    hooks_of,
    immutability_problems,
)
from testkit.strategies import yaml_scalars

DRAIN = "pre-drain.delete.hook.machine.cluster.x-k8s.io"
TERMINATE = "pre-terminate.delete.hook.machine.cluster.x-k8s.io"
FROZEN = (
    "hooks are immutable when machine is marked for deletion: "
    "the following hooks are new or changed"
)


def machine(
    pre_drain: list[dict[str, str]] | None = None,
    pre_terminate: list[dict[str, str]] | None = None,
    annotations: dict[str, str] | None = None,
    deleting: bool = False,
) -> dict[str, Any]:
    md: dict[str, Any] = {"name": "m", "namespace": "ns", "annotations": annotations or {}}
    if deleting:
        md["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    hooks = {k: v for k, v in (("preDrain", pre_drain), ("preTerminate", pre_terminate)) if v}
    return {"metadata": md, "spec": {"lifecycleHooks": hooks}}


def hook(name: str, owner: str = "owner") -> dict[str, str]:
    return {"name": name, "owner": owner}


def test_spec_hooks_keep_their_order_then_annotations_follow_by_key() -> None:
    m = machine(
        pre_drain=[hook("zeta", "a"), hook("alpha", "b")],
        pre_terminate=[hook("etcd", "etcd-operator")],
        annotations={
            f"{DRAIN}/second": "y",
            f"{DRAIN}/first": "x",
            f"{TERMINATE}/backup": "",
            "unrelated.example.com/x": "z",
        },
    )
    assert hooks_of(m) == Hooks(
        pre_drain=(
            Hook("zeta", "a"),
            Hook("alpha", "b"),
            Hook("first", "x", annotation=True),
            Hook("second", "y", annotation=True),
        ),
        pre_terminate=(Hook("etcd", "etcd-operator"), Hook("backup", "", annotation=True)),
    )


def test_a_key_with_the_prefix_but_no_name_is_a_hook_named_by_the_key() -> None:
    # Cluster API counts every key that starts with the prefix (HasWithPrefix).
    assert hooks_of(machine(annotations={DRAIN: "x", f"{DRAIN}-extra": "y"})).pre_drain == (
        Hook(DRAIN, "x", annotation=True),
        Hook(f"{DRAIN}-extra", "y", annotation=True),
    )


def test_messages_print_hooks_as_go_prints_the_machine_apis_struct() -> None:
    assert go_list([]) == "[]"
    assert go_list([Hook("a", "b"), Hook("c", "d", annotation=True)]) == (
        "[{Name:a Owner:b} {Name:c Owner:d}]"
    )
    assert annotation_key("preTerminate", "etcd") == f"{TERMINATE}/etcd"


@given(
    st.recursive(
        yaml_scalars,
        lambda inner: st.lists(inner) | st.dictionaries(st.text(max_size=8), inner),
        max_leaves=20,
    )
)
def test_any_shape_reads_without_failing(garbage: Any) -> None:
    for m in (
        garbage,
        {"spec": garbage},
        {"spec": {"lifecycleHooks": garbage}},
        {"spec": {"lifecycleHooks": {"preDrain": garbage}}},
        {"metadata": {"annotations": garbage}},
    ):
        if isinstance(m, dict):
            hooks_of(m)
            immutability_problems(m, m)


def test_an_entry_that_cannot_be_read_still_blocks() -> None:
    m = {"spec": {"lifecycleHooks": {"preDrain": ["odd", {"owner": 3}]}}}
    assert len(hooks_of(m).pre_drain) == 2


names = st.text("abcdefgh0123-", min_size=3, max_size=6)
hook_lists = st.lists(st.builds(hook, names, names), unique_by=lambda h: h["name"], max_size=4)
capi = st.dictionaries(
    st.sampled_from([DRAIN, TERMINATE]).flatmap(lambda p: names.map(lambda n: f"{p}/{n}")),
    names,
    max_size=3,
)


@given(hook_lists, hook_lists, capi)
def test_removing_hooks_is_always_allowed(drain: Any, terminate: Any, annotations: Any) -> None:
    old = machine(drain, terminate, annotations, deleting=True)
    new = machine(drain[1:], terminate[:-1], dict(list(annotations.items())[1:]), deleting=True)
    assert immutability_problems(old, new) == []


@given(hook_lists, hook_lists, capi, st.data())
def test_before_deletion_anything_goes(
    drain: Any, terminate: Any, annotations: Any, data: Any
) -> None:
    other = data.draw(hook_lists)
    assert (
        immutability_problems(machine(drain, terminate, annotations), machine(other, other, {}))
        == []
    )


@given(hook_lists, names, names)
def test_adding_or_changing_a_hook_once_deleting_is_refused(
    drain: Any, name: str, owner: str
) -> None:
    old = machine(pre_drain=drain, deleting=True)
    new = copy.deepcopy(old)
    existing = {h["name"]: h for h in drain}
    new["spec"]["lifecycleHooks"]["preDrain"] = [h for h in drain if h["name"] != name] + [
        hook(name, owner)
    ]
    problems = immutability_problems(old, new)
    if existing.get(name) == hook(name, owner):
        assert problems == []
    else:
        assert problems == [
            f"spec.lifecycleHooks.preDrain: Forbidden: pre-drain {FROZEN}: "
            f"[{{Name:{name} Owner:{owner}}}]"
        ]


def test_annotations_and_both_points_are_reported_each() -> None:
    old = machine(pre_drain=[hook("a")], deleting=True)
    new = machine(
        pre_drain=[hook("a"), hook("b")],
        pre_terminate=[hook("c")],
        annotations={f"{TERMINATE}/d": "x", f"{DRAIN}/a": "owner"},
        deleting=True,
    )
    assert immutability_problems(old, new) == [
        f"spec.lifecycleHooks.preDrain: Forbidden: pre-drain {FROZEN}: [{{Name:b Owner:owner}}]",
        f"metadata.annotations: Forbidden: pre-drain {FROZEN}: [{{Name:a Owner:owner}}]",
        f"spec.lifecycleHooks.preTerminate: Forbidden: pre-terminate {FROZEN}: "
        "[{Name:c Owner:owner}]",
        f"metadata.annotations: Forbidden: pre-terminate {FROZEN}: [{{Name:d Owner:x}}]",
    ]


unique_hooks = st.lists(
    st.builds(Hook, names, names, st.booleans()), unique_by=lambda h: (h.annotation, h.name)
)


@given(unique_hooks, unique_hooks)
def test_changed_hooks_are_those_of_new_not_in_old(old: list[Hook], new: list[Hook]) -> None:
    # Names are unique where hooks are declared: the CRD's list-map, and annotation keys.
    assert changed(old, new) == tuple(h for h in new if h not in old)
    assert changed(new, new) == ()


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch, as the API server applies it."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge(out.get(k), v)
    return out


@given(hook_lists, capi, st.sampled_from(["preDrain", "preTerminate"]), names, names, st.booleans())
def test_an_owners_patch_adds_or_removes_exactly_its_hook(
    drain: Any, annotations: Any, point: Any, name: str, owner: str, annotation: bool
) -> None:
    before = machine(drain, drain, annotations)
    h = Hook(name, owner, annotation)
    others = [x for x in hooks_of(before).at(point) if (x.annotation, x.name) != (annotation, name)]
    for present in (True, False):
        patch = hook_patch(before, point, h, present)
        after = merge(before, patch) if patch else before
        assert [x for x in hooks_of(after).at(point) if x != h] == others
        assert (h in hooks_of(after).at(point)) is present
        assert hook_patch(after, point, h, present) is None
        other_point = "preTerminate" if point == "preDrain" else "preDrain"
        assert hooks_of(after).at(other_point) == hooks_of(before).at(other_point)
