"""What ferryman does with each Machine's lifecycle hooks: pure, no I/O, no clock.

The leader keeps a pre-drain hook ``IngressTrafficDrain`` (owner
``ferryman.io/ingress-controller``) on every Machine whose Node runs endpoints
that served Ingresses route to, or a ferryman replica; and a pre-terminate hook
of the same name on the Machines whose Node runs a replica. It never adds one to
a Machine being deleted, never touches a hook of another owner, and puts a hook
of its name right when the owner is wrong (so that the Machine API waits for
ferryman, not for whoever wrote it).

Once a Machine is being deleted, every replica takes its Node's endpoints out of
rotation and the replica on that Node fails readiness (``replica.py``); each
reports what its data plane measures (``DrainReport``). The pre-drain hook goes
when every live replica has applied that and counts no request in flight to
the endpoints it took out, and the Node's own replica is out of rotation with
no request in flight through it: that is "drained". Or when
``--machine-drain-timeout`` has passed since the deletion began (a Warning
says what was still in flight). The pre-terminate hook goes once no live
replica runs on the Node (its pod was evicted by the drain, and it stopped),
or after the timeout counted from when it started waiting.

A slow request through the leaving Node (a long download, a WebSocket) holds
the drain until it ends or the timeout passes. ``--drain-in-flight-timeout``
caps that part alone: once only requests in flight are left (every live replica
has taken the Node out of rotation and its own replica is not ready), the hook
goes that many seconds after the deletion began, cutting those requests off
when the Node goes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ferryman.engine.settings import CONTROLLER_NAME
from ferryman.machines.hooks import POINTS, Hook, Hooks, Point, hook_patch, hooks_of

HOOK_NAME = "IngressTrafficDrain"
HOOK_OWNER = CONTROLLER_NAME

DRAINING = "IngressTrafficDraining"
DRAINED = "IngressTrafficDrained"
TIMED_OUT = "IngressTrafficDrainTimedOut"
IN_FLIGHT_TIMED_OUT = "IngressTrafficDrainInFlightTimedOut"
STOPPED = "IngressReplicaStopped"
STOP_TIMED_OUT = "IngressReplicaStopTimedOut"

Flavour = Literal["openshift", "cluster-api"]

# Seconds a Node must look drained, without a break, before its hook goes.
SETTLE = 1.0


def our_hook(flavour: Flavour) -> Hook:
    """ferryman's hook, where the flavour's API declares hooks."""
    return Hook(HOOK_NAME, HOOK_OWNER, annotation=flavour == "cluster-api")


@dataclass(frozen=True)
class MachineView:
    namespace: str
    name: str
    uid: str
    node: str  # status.nodeRef.name; "" while the Machine has no Node
    deleting_since: float | None  # deletionTimestamp, seconds since the epoch
    hooks: Hooks
    raw: Mapping[str, Any] = field(repr=False, compare=False)


@dataclass(frozen=True)
class DrainReport:
    """One live replica's view of the drains. ``in_flight``: for each leaving
    Node it has applied, requests in flight to the endpoints it took out there
    (None: its data plane cannot count per endpoint). ``replica_in_flight``:
    through this replica (None: not measured)."""

    identity: str
    node: str
    ready: bool
    applied: frozenset[str] = frozenset()
    in_flight: Mapping[str, int | None] = field(default_factory=dict)
    replica_in_flight: int | None = None


@dataclass(frozen=True)
class Patch:
    point: Point
    hook: Hook
    present: bool


@dataclass(frozen=True)
class Notice:
    type: str  # "Normal" or "Warning"
    reason: str
    message: str


@dataclass(frozen=True)
class Step:
    """What to do with one Machine now: hook changes, an Event, and whether a
    drain ended (``result``: "drained", "timed_out" or "in_flight_timed_out";
    for the metrics)."""

    patches: tuple[Patch, ...] = ()
    notice: Notice | None = None
    result: str = ""

    def patch_for(self, machine: Mapping[str, Any]) -> dict[str, Any] | None:
        """One merge patch for all of ``patches`` (None: the Machine has them so)."""
        merged: dict[str, Any] = {}
        current: Mapping[str, Any] = machine
        for p in self.patches:
            body = hook_patch(current, p.point, p.hook, p.present)
            if body is None:
                continue
            _merge(merged, body)
            current = _applied(current, body)
        return merged or None


def machine_view(obj: Mapping[str, Any], deleting_since: float | None) -> MachineView | None:
    """The fields decide() reads; None for an object without a name."""
    md = obj.get("metadata")
    if not isinstance(md, Mapping) or not md.get("name"):
        return None
    status = obj.get("status")
    ref = status.get("nodeRef") if isinstance(status, Mapping) else None
    node = ref.get("name") if isinstance(ref, Mapping) else None
    return MachineView(
        str(md.get("namespace") or ""),
        str(md["name"]),
        str(md.get("uid") or ""),
        node if isinstance(node, str) else "",
        deleting_since,
        hooks_of(obj),
        obj,
    )


def leaving_nodes(machines: Iterable[MachineView]) -> frozenset[str]:
    """Nodes whose Machine is being deleted: their endpoints leave rotation."""
    return frozenset(m.node for m in machines if m.deleting_since is not None and m.node)


def _ours(hooks: Iterable[Hook], hook: Hook) -> bool:
    return any(h == hook for h in hooks)


def keep(
    machine: MachineView,
    flavour: Flavour,
    nodes_in_use: frozenset[str],
    replica_nodes: frozenset[str],
) -> Step:
    """A Machine not being deleted: our hooks where its Node needs them, and only there."""
    hook = our_hook(flavour)
    patches = []
    wanted: dict[Point, bool] = {
        "preDrain": bool(machine.node) and machine.node in nodes_in_use | replica_nodes,
        "preTerminate": bool(machine.node) and machine.node in replica_nodes,
    }
    for point in POINTS:
        have = machine.hooks.at(point)
        named = [h for h in have if h.name == hook.name and h.annotation == hook.annotation]
        if wanted[point] and not _ours(have, hook):
            patches.append(Patch(point, hook, True))
        elif not wanted[point] and named and _ours(named, hook):
            patches.append(Patch(point, hook, False))
    return Step(tuple(patches))


def drain(
    machine: MachineView,
    flavour: Flavour,
    live: list[DrainReport],
    now: float,
    timeout: float,
    announced: bool,
    terminate_since: float | None,
    quiet_since: float | None = None,
    in_flight_timeout: float = 0.0,
) -> Step:
    """A Machine being deleted. ``announced``: the Draining Event was written;
    ``terminate_since``: when its pre-terminate hook began to wait (None: not yet);
    ``quiet_since``: since when ``waiting_on`` has found nothing, without a break
    (the drain ends only after ``SETTLE`` seconds of that: a reading is one
    moment, and a replica publishes only what changed); ``in_flight_timeout``:
    seconds after the deletion began when requests in flight stop holding the
    drain (0: until ``timeout``)."""
    hook = our_hook(flavour)
    node = machine.node or "(no Node)"
    if _ours(machine.hooks.pre_drain, hook):
        assert machine.deleting_since is not None
        waiting = waiting_on(machine.node, live)
        elapsed = now - machine.deleting_since
        if not waiting and quiet_since is not None and now - quiet_since >= SETTLE:
            return Step(
                (Patch("preDrain", hook, False),),
                Notice(
                    "Normal",
                    DRAINED,
                    f"no request in flight to Node {node}'s endpoints on any of "
                    f"{len(live)} ferryman replicas after {elapsed:.1f}s; pre-drain hook "
                    f"{HOOK_NAME} removed",
                ),
                "drained",
            )
        if timeout > 0 and elapsed >= timeout:
            return Step(
                (Patch("preDrain", hook, False),),
                Notice(
                    "Warning",
                    TIMED_OUT,
                    f"traffic had not left Node {node} within {timeout:g}s "
                    f"({'; '.join(waiting)}); pre-drain hook {HOOK_NAME} removed anyway",
                ),
                "timed_out",
            )
        if 0 < in_flight_timeout <= elapsed and not _out_of_rotation_pending(machine.node, live):
            return Step(
                (Patch("preDrain", hook, False),),
                Notice(
                    "Warning",
                    IN_FLIGHT_TIMED_OUT,
                    f"Node {node} is out of rotation on every ferryman replica; requests "
                    f"still in flight after {in_flight_timeout:g}s ({'; '.join(waiting)}) "
                    f"are not waited for; pre-drain hook {HOOK_NAME} removed",
                ),
                "in_flight_timed_out",
            )
        if not announced:
            return Step(
                notice=Notice(
                    "Normal",
                    DRAINING,
                    f"taking Node {node}'s endpoints and ferryman replica out of rotation; "
                    f"holding the drain until no request is in flight to them"
                    + (f" (at most {timeout:g}s)" if timeout > 0 else ""),
                )
            )
        return Step()
    if _ours(machine.hooks.pre_terminate, hook):
        running = sorted(r.identity for r in live if machine.node and r.node == machine.node)
        if not running:
            return Step(
                (Patch("preTerminate", hook, False),),
                Notice(
                    "Normal",
                    STOPPED,
                    f"no ferryman replica runs on Node {node}; pre-terminate hook "
                    f"{HOOK_NAME} removed",
                ),
            )
        since = now if terminate_since is None else terminate_since
        if timeout > 0 and now - since >= timeout:
            return Step(
                (Patch("preTerminate", hook, False),),
                Notice(
                    "Warning",
                    STOP_TIMED_OUT,
                    f"ferryman replica {', '.join(running)} still runs on Node {node} after "
                    f"{timeout:g}s; pre-terminate hook {HOOK_NAME} removed anyway",
                ),
            )
    return Step()


def _out_of_rotation_pending(node: str, live: list[DrainReport]) -> bool:
    """Whether anything but requests in flight still holds ``node``: no live
    replica, one that has not applied the drain, or its own replica still ready."""
    return not live or any(
        node not in r.applied or (node and r.node == node and r.ready) for r in live
    )


def waiting_on(node: str, live: list[DrainReport]) -> list[str]:
    """What keeps ``node`` from being drained, per replica (empty: drained)."""
    waiting = []
    if not live:
        return ["no live ferryman replica reports"]
    for r in live:
        if node not in r.applied:
            waiting.append(f"{r.identity}: not yet applied")
            continue
        count = r.in_flight.get(node)
        if count is None:
            waiting.append(f"{r.identity}: cannot count requests per endpoint")
        elif count:
            waiting.append(f"{r.identity}: {count} in flight to the Node's endpoints")
        if node and r.node == node:
            if r.ready:
                waiting.append(f"{r.identity}: still ready")
            elif r.replica_in_flight is None:
                waiting.append(f"{r.identity}: cannot count requests through the replica")
            elif r.replica_in_flight:
                waiting.append(f"{r.identity}: {r.replica_in_flight} in flight through the replica")
    return waiting


def _merge(into: dict[str, Any], body: Mapping[str, Any]) -> None:
    for k, v in body.items():
        if isinstance(v, Mapping) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        else:
            into[k] = dict(v) if isinstance(v, Mapping) else v


def _applied(obj: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` with a JSON merge patch applied (RFC 7386)."""
    out = dict(obj)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, Mapping):
            base = out.get(k)
            out[k] = _applied(base if isinstance(base, Mapping) else {}, v)
        else:
            out[k] = v
    return out
