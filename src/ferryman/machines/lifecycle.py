"""The deletion order of a Machine, as a function of what the Machine says.

The Machine API's order (machine-api-operator's machine and drain controllers):
finalizer ``machine.machine.openshift.io`` while the Machine lives; once it is
marked for deletion, phase ``Deleting``; then the node is drained, unless
pre-drain hooks exist (``DrainBlocked``, the controller waits for their owners)
or there is no node to drain; then it waits for pre-terminate hooks; then the
instance is deleted, then the Node, then the finalizer is removed. Each step
is decided from the Machine alone, so any replica, after any restart, picks up
where the last one stopped.

Pure: ``next_step`` and ``status_patch`` read a Machine as a dict.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from ferryman.machines import conditions
from ferryman.machines.hooks import hooks_of, is_deleting

FINALIZER = "machine.machine.openshift.io"
PHASE_DELETING = "Deleting"
# Set on a Machine whose node must not be drained (the Machine API's annotation).
EXCLUDE_NODE_DRAINING = "machine.openshift.io/exclude-node-draining"

# The Machine API's waits: a drain round's bound, the first pause after a
# failed round (doubling up to MAX_BACKOFF: its drain rate limiter), and the
# poll while an instance is being deleted.
DRAIN_TIMEOUT = 20.0
DRAIN_BACKOFF = 5.0
MAX_BACKOFF = 1000.0
INSTANCE_POLL = 30.0
EVICTION_RETRY = 5.0  # kubectl drain's pause before evicting a PDB-protected pod again


class Step(enum.Enum):
    ADD_FINALIZER = "add the finalizer"
    NOTHING = "nothing to do"
    DRAIN_BLOCKED = "wait for pre-drain hooks"
    DRAIN_SKIPPED = "mark drained: no node to drain"
    DRAIN = "cordon and drain the node"
    TERMINATE_BLOCKED = "wait for pre-terminate hooks"
    TERMINATE = "delete the instance, then the node, then the finalizer"


def _metadata(machine: Mapping[str, Any]) -> Mapping[str, Any]:
    md = machine.get("metadata")
    return md if isinstance(md, Mapping) else {}


def _status(machine: Mapping[str, Any]) -> Mapping[str, Any]:
    status = machine.get("status")
    return status if isinstance(status, Mapping) else {}


def node_name(machine: Mapping[str, Any]) -> str | None:
    ref = _status(machine).get("nodeRef")
    name = ref.get("name") if isinstance(ref, Mapping) else None
    return name if isinstance(name, str) and name else None


def has_finalizer(machine: Mapping[str, Any]) -> bool:
    return FINALIZER in (_metadata(machine).get("finalizers") or ())


def next_step(machine: Mapping[str, Any]) -> Step:
    if not is_deleting(machine):
        return Step.NOTHING if has_finalizer(machine) else Step.ADD_FINALIZER
    if not has_finalizer(machine):
        return Step.NOTHING  # released: the API server deletes it
    hooks = hooks_of(machine)
    if not conditions.is_true(_status(machine).get("conditions") or (), conditions.DRAINED):
        annotations = _metadata(machine).get("annotations") or {}
        if node_name(machine) is None or EXCLUDE_NODE_DRAINING in annotations:
            return Step.DRAIN_SKIPPED
        return Step.DRAIN_BLOCKED if hooks.pre_drain else Step.DRAIN
    return Step.TERMINATE_BLOCKED if hooks.pre_terminate else Step.TERMINATE


def status_patch(machine: Mapping[str, Any], now: str) -> dict[str, Any] | None:
    """The status a reconcile must write (phase when deleting, the hook
    conditions always), or None when the Machine already shows it."""
    status = _status(machine)
    current = status.get("conditions") or []
    want = conditions.merged(current, conditions.hook_conditions(hooks_of(machine)), now)
    patch: dict[str, Any] = {}
    if want != current:
        patch["conditions"] = want
    if is_deleting(machine) and status.get("phase") != PHASE_DELETING:
        patch["phase"] = PHASE_DELETING
    return patch or None
