"""Machine deletion lifecycle hooks, read from both APIs that declare them.

OpenShift's Machine API lists them in ``spec.lifecycleHooks.{preDrain,preTerminate}``
as ``{name, owner}``; Cluster API declares them as annotations
``pre-drain.delete.hook.machine.cluster.x-k8s.io/<name>: <owner>`` (and
``pre-terminate...``). A Machine may carry both; every hook of a point blocks
it until its owner removes it. There are no timeouts: only the owner removes a
hook (the Machine API's rule).

Pure: a Machine as a dict in, hooks and problems out. The reference machine
controller, its webhook and a hook-implementing controller all read hooks here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Point = Literal["preDrain", "preTerminate"]
POINTS: tuple[Point, ...] = ("preDrain", "preTerminate")

# Cluster API's annotation prefixes (CAPI api/core machine_types.go); a key
# counts when it starts with the prefix, as CAPI's annotations.HasWithPrefix
# decides, and the hook's name is what follows "<prefix>/".
ANNOTATION_PREFIX: dict[Point, str] = {
    "preDrain": "pre-drain.delete.hook.machine.cluster.x-k8s.io",
    "preTerminate": "pre-terminate.delete.hook.machine.cluster.x-k8s.io",
}

# The words the Machine API's messages use for each point.
_WORD: dict[Point, str] = {"preDrain": "pre-drain", "preTerminate": "pre-terminate"}


@dataclass(frozen=True)
class Hook:
    """One hook. ``annotation`` is where it is declared: Cluster API's annotation
    (True) or ``spec.lifecycleHooks`` (False); the same name may be in both."""

    name: str
    owner: str
    annotation: bool = False

    def go(self) -> str:
        """As Go's ``%+v`` prints a ``LifecycleHook``: the Machine API's messages use it."""
        return f"{{Name:{self.name} Owner:{self.owner}}}"


@dataclass(frozen=True)
class Hooks:
    pre_drain: tuple[Hook, ...] = ()
    pre_terminate: tuple[Hook, ...] = ()

    def at(self, point: Point) -> tuple[Hook, ...]:
        return self.pre_drain if point == "preDrain" else self.pre_terminate


def go_list(hooks: Iterable[Hook]) -> str:
    """Go's ``%+v`` of a ``[]LifecycleHook``: ``[{Name:a Owner:b} {Name:c Owner:d}]``."""
    return "[" + " ".join(h.go() for h in hooks) + "]"


def annotation_key(point: Point, name: str) -> str:
    return f"{ANNOTATION_PREFIX[point]}/{name}"


def hooks_of(machine: Mapping[str, Any]) -> Hooks:
    """Every hook of a Machine: spec entries in their order, then annotations by key.

    Whatever shape it is handed it answers: an entry it cannot read still blocks
    (a hook someone meant must never be skipped), named by what is there.
    """
    spec = _mapping(machine.get("spec"))
    declared = _mapping(spec.get("lifecycleHooks"))
    annotations = _mapping(_mapping(machine.get("metadata")).get("annotations"))
    found: dict[Point, list[Hook]] = {p: [] for p in POINTS}
    for point in POINTS:
        entries = declared.get(point)
        for entry in entries if isinstance(entries, list) else ():
            e = _mapping(entry)
            found[point].append(Hook(_text(e.get("name", entry)), _text(e.get("owner", ""))))
        prefix = ANNOTATION_PREFIX[point]
        for key in sorted(k for k in annotations if isinstance(k, str) and k.startswith(prefix)):
            name = key[len(prefix) + 1 :] if key.startswith(prefix + "/") else key
            found[point].append(Hook(name, _text(annotations[key]), annotation=True))
    return Hooks(tuple(found["preDrain"]), tuple(found["preTerminate"]))


def hook_patch(
    machine: Mapping[str, Any], point: Point, hook: Hook, present: bool
) -> dict[str, Any] | None:
    """A JSON merge patch that adds (``present``) or removes ``hook``, where it is
    declared, or None when the Machine already has it so: what a hook's owner
    sends. A spec list is replaced whole, so send it with the resourceVersion
    read (a 409 means: read again) lest another owner's change be lost."""
    if hook.annotation:
        key = annotation_key(point, hook.name)
        annotations = _mapping(_mapping(machine.get("metadata")).get("annotations"))
        if (annotations.get(key) == hook.owner) if present else key not in annotations:
            return None
        return {"metadata": {"annotations": {key: hook.owner if present else None}}}
    declared = _mapping(_mapping(machine.get("spec")).get("lifecycleHooks")).get(point)
    current = (
        [dict(e) for e in declared if isinstance(e, Mapping)] if isinstance(declared, list) else []
    )
    entry = {"name": hook.name, "owner": hook.owner}
    if present:
        if entry in current:
            return None
        wanted = [entry if e.get("name") == hook.name else e for e in current]
        wanted += [] if entry in wanted else [entry]
    else:
        wanted = [e for e in current if e.get("name") != hook.name]
        if wanted == current:
            return None
    return {"spec": {"lifecycleHooks": {point: wanted or None}}}


def changed(old: Iterable[Hook], new: Iterable[Hook]) -> tuple[Hook, ...]:
    """Hooks of ``new`` that ``old`` lacks or had with another owner (by name,
    within where they are declared): the Machine API's GetChangedLifecycleHooks."""
    before = {(h.annotation, h.name): h for h in old}
    return tuple(h for h in new if before.get((h.annotation, h.name)) != h)


def is_deleting(machine: Mapping[str, Any]) -> bool:
    return bool(_mapping(machine.get("metadata")).get("deletionTimestamp"))


def immutability_problems(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Why an update of a Machine marked for deletion must be refused: it adds or
    changes hooks. Removing them is always allowed: that is how owners release.

    Messages are the Machine API webhook's (``field.Forbidden``, as its
    aggregate prints them), with ``metadata.annotations`` for Cluster API's.
    """
    if not is_deleting(new):
        return []
    before, after = hooks_of(old), hooks_of(new)
    problems = []
    for point in POINTS:
        for annotation, where in (
            (False, f"spec.lifecycleHooks.{point}"),
            (True, "metadata.annotations"),
        ):
            new_hooks = changed(
                (h for h in before.at(point) if h.annotation == annotation),
                (h for h in after.at(point) if h.annotation == annotation),
            )
            if new_hooks:
                problems.append(
                    f"{where}: Forbidden: {_WORD[point]} hooks are immutable when machine is "
                    f"marked for deletion: the following hooks are new or changed: "
                    f"{go_list(new_hooks)}"
                )
    return problems


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)
