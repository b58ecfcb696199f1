"""Gateway API status, as ``GatewayStatusSink`` (report/__init__.py) promises it.

The translator says what a GatewayClass's, Gateway's or route's status should
be; ``GatewayStatusWriter`` makes the object show it (the kinds it writes are
those whose ``KindSpec.status`` is ``OWN``: the registry hands them over):

* only the leader writes; each object's latest wanted status wins (the queue
  holds objects, not statuses), and a new leader writes them all;
* conditions get their ``lastTransitionTime`` here: kept from the object while
  a condition of that type keeps its status, else now (RFC 3339, seconds, Z),
  so a resync that changes nothing changes no timestamp;
* a route's ``status.parents`` (HTTPRoute's, TLSRoute's), and a policy's
  ``status.ancestors`` (BackendTLSPolicy's), hold other
  controllers' entries too: those (by ``controllerName``) are kept, ours
  replaced;
* nothing is written when the object already shows it (first by the store's
  copy, then by a fresh read), so a status write's own watch event, which
  makes the translator say the same again, ends there;
* API errors and an unreachable API server are retried with backoff; 404 (the
  object is gone) ends it; a refused status (400/422, a bug) is logged.

The write is a JSON merge patch of the whole ``status`` on the status
subresource, with keys we no longer set as null: custom resources take no
strategic merge patch, a merge patch replaces each list whole (conditions,
listeners, parents are replaced exactly), and server-side apply would give an
atomic ``parents`` list one owner, fighting other controllers. The patch
carries the ``resourceVersion`` that was read, so the API server refuses it
(409, retried after a fresh read) if the object changed in between: another
controller's parent entry written meanwhile is never lost.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from ferryman.kube import client as kube
from ferryman.kube.errors import BadRequest, Invalid, KubeError, NotFound
from ferryman.kube.resources import AsyncClient
from ferryman.kube.writers import merge_patch as write_status
from ferryman.resources.meta import ObjectRef

log = logging.getLogger("ferryman.report")

GROUP = "gateway.networking.k8s.io"
# Backoff of a failed write, per object: quick first (a 409 after a concurrent
# change), capped.
RETRY_MIN = 0.2
RETRY_MAX = 30.0
# The fewest wanted statuses at which those of deleted objects are swept.
SWEEP_MIN = 1024

Status = Mapping[str, Any]
Read = Callable[[str, str, str], Mapping[str, Any] | None]


def rfc3339(now: datetime.datetime) -> str:
    """metav1.Time: seconds, UTC, ``Z``."""
    return now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def stamped(wanted: Any, have: Any, now: str) -> list[Any]:
    """``wanted`` conditions with lastTransitionTime: ``have``'s for a type whose
    status is unchanged, else ``now``."""
    before = {
        c.get("type"): c for c in (have if isinstance(have, list) else []) if isinstance(c, Mapping)
    }
    out: list[Any] = []
    for c in wanted if isinstance(wanted, list) else []:
        if not isinstance(c, Mapping):
            out.append(c)
            continue
        old = before.get(c.get("type"))
        kept = old is not None and old.get("status") == c.get("status")
        since = old.get("lastTransitionTime") if kept and old is not None else None
        out.append({**c, "lastTransitionTime": since or now})
    return out


def _by(items: Any, key: Callable[[Mapping[str, Any]], Any]) -> dict[Any, Mapping[str, Any]]:
    return {key(i): i for i in (items if isinstance(items, list) else []) if isinstance(i, Mapping)}


# The per-parent lists: a route's parents (parentRef), a policy's ancestors
# (ancestorRef: BackendTLSPolicy's), each entry with its controllerName.
_PARENT_LISTS = (("parents", "parentRef"), ("ancestors", "ancestorRef"))


def _parent_key(
    entry: Mapping[str, Any], namespace: str, field: str = "parentRef"
) -> tuple[Any, ...]:
    """A route parent entry's identity: its controller and its parentRef with
    the CRD's defaults (group, kind) and the route's namespace filled in."""
    ref = entry.get(field)
    ref = ref if isinstance(ref, Mapping) else {}
    return (
        entry.get("controllerName"),
        ref.get("group", GROUP),
        ref.get("kind", "Gateway"),
        ref.get("namespace") or namespace,
        ref.get("name"),
        ref.get("sectionName"),
        ref.get("port"),
    )


def _defaulted_kinds(kinds: Any) -> Any:
    """A listener's supportedKinds with the CRD's default group, as the API
    server stores them (otherwise every comparison would differ)."""
    if not isinstance(kinds, list):
        return kinds
    return [{"group": GROUP, **k} if isinstance(k, Mapping) else k for k in kinds]


def _defaulted_parent(entry: Mapping[str, Any], field: str = "parentRef") -> dict[str, Any]:
    ref = entry.get(field)
    if not isinstance(ref, Mapping):
        return dict(entry)
    return {**entry, field: {"group": GROUP, "kind": "Gateway", **ref}}


def desired(
    ref: ObjectRef, wanted: Status, have: Status, controller: str, now: str
) -> dict[str, Any]:
    """The whole status ``ref`` should show, given what it shows (``have``)."""
    out = copy.deepcopy(dict(wanted))
    for key, field in _PARENT_LISTS:  # a route's, a policy's
        if key not in wanted:
            continue
        had = have.get(key)
        had_by = {
            _parent_key(p, ref.namespace, field): p
            for p in (had if isinstance(had, list) else [])
            if isinstance(p, Mapping)
        }
        ours = []
        for p in out.get(key) or []:
            if isinstance(p, Mapping):
                old = had_by.get(_parent_key(p, ref.namespace, field), {})
                p = {**_defaulted_parent(p, field), "conditions": stamped(
                    p.get("conditions"), old.get("conditions"), now
                )}  # fmt: skip
            ours.append(p)
        others = [
            p
            for p in (have.get(key) or [])
            if isinstance(p, Mapping) and p.get("controllerName") != controller
        ]
        out[key] = others + ours
        return out
    if "conditions" in out:
        out["conditions"] = stamped(out["conditions"], have.get("conditions"), now)
    if isinstance(out.get("listeners"), list):
        before = _by(have.get("listeners"), lambda li: li.get("name"))
        listeners = []
        for li in out["listeners"]:
            if isinstance(li, Mapping):
                old = before.get(li.get("name"), {})
                li = {**li, "conditions": stamped(li.get("conditions"), old.get("conditions"), now)}
                if "supportedKinds" in li:
                    li["supportedKinds"] = _defaulted_kinds(li["supportedKinds"])
            listeners.append(li)
        out["listeners"] = listeners
    return out


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def shows(ref: ObjectRef, have: Status, want: Status) -> bool:
    """Whether the object's status ``have`` is ``want`` (route parents, policy
    ancestors in any order)."""
    key = next((k for k, _ in _PARENT_LISTS if k in want), None)
    if key is None:
        return _canonical(have) == _canonical(want)
    rest = {k: v for k, v in have.items() if k != key}
    if _canonical(rest) != _canonical({k: v for k, v in want.items() if k != key}):
        return False
    parents = sorted(_canonical(p) for p in have.get(key) or [])
    return parents == sorted(_canonical(p) for p in want.get(key) or [])


def merge_patch(have: Status, want: Status) -> dict[str, Any]:
    """A merge patch turning status ``have`` into ``want``: removed keys are null."""
    return {**dict.fromkeys(have), **want}


def _now() -> str:
    return rfc3339(datetime.datetime.now(datetime.UTC))


class GatewayStatusWriter:
    """The leader's writer of Gateway API status (see the module's docstring)."""

    def __init__(
        self,
        client: AsyncClient,
        controller: str,
        resources: Mapping[str, Any],
        read: Read | None = None,
        now: Callable[[], str] = _now,
    ) -> None:
        """``controller``: our controllerName (route parents); ``resources``:
        the kinds written, as lightkube resources (``kube.resources.resource_for``);
        ``read``: the store's ``get``, whose copy saves a read when it already
        shows the status."""
        self._resources = dict(resources)
        self._client = client
        self._controller = controller
        self._read = read
        self._now = now
        self._wanted: dict[ObjectRef, Status] = {}
        self._queue: asyncio.Queue[ObjectRef] = asyncio.Queue()
        self._queued: set[ObjectRef] = set()
        self._backoff: dict[ObjectRef, float] = {}
        self._leader = False
        # Objects deleted after their last status would stay wanted for ever
        # (only a write's 404 drops one): past this many, those the store no
        # longer holds are dropped, and the bound doubles from what is left.
        self._sweep_at = SWEEP_MIN

    def want(self, ref: ObjectRef, status: Status) -> None:
        if ref.kind not in self._resources:
            raise ValueError(f"no Gateway API status for {ref.kind}")
        self._wanted[ref] = copy.deepcopy(status)
        if len(self._wanted) >= self._sweep_at:
            self._sweep()
        if self._leader:
            self._enqueue(ref)

    def _sweep(self) -> None:
        read = self._read
        if read is not None:
            for gone in [r for r in self._wanted if read(*r) is None]:
                del self._wanted[gone]
        self._sweep_at = max(SWEEP_MIN, 2 * len(self._wanted))

    def wanted(self) -> int:
        """How many objects' statuses are held (for tests and gauges)."""
        return len(self._wanted)

    def set_leader(self, leader: bool) -> None:
        self._leader = leader
        if leader:
            for ref in self._wanted:
                self._enqueue(ref)

    def _enqueue(self, ref: ObjectRef) -> None:
        if ref not in self._queued:
            self._queued.add(ref)
            self._queue.put_nowait(ref)

    async def run(self) -> None:
        while True:
            ref = await self._queue.get()
            self._queued.discard(ref)
            wanted = self._wanted.get(ref)
            if not self._leader or wanted is None:
                continue
            try:
                await self.write(ref, wanted)
                self._backoff.pop(ref, None)
            except NotFound:  # gone: nothing to report on
                self._backoff.pop(ref, None)
                if self._wanted.get(ref) is wanted:
                    del self._wanted[ref]
            except (
                BadRequest,
                Invalid,
            ) as e:  # a retry cannot fix it: the status itself is invalid
                log.warning("status refused", extra={"fields": _fields(ref, e)})
            except KubeError as e:
                self._retry(ref, e)
            except Exception as e:  # API unreachable: retried
                self._retry(ref, e)

    def _retry(self, ref: ObjectRef, e: Exception) -> None:
        delay = self._backoff.get(ref, RETRY_MIN)
        self._backoff[ref] = min(delay * 2, RETRY_MAX)
        log.warning("status write failed; retrying", extra={"fields": _fields(ref, e)})
        asyncio.get_running_loop().call_later(delay, self._enqueue, ref)

    async def write(self, ref: ObjectRef, wanted: Status) -> bool:
        """Make ``ref`` show ``wanted``; False when it already did."""
        if self._read is not None and (cached := self._read(*ref)) is not None:
            have = _status_of(cached)
            if shows(ref, have, desired(ref, wanted, have, self._controller, self._now())):
                return False
        resource = self._resources[ref.kind]
        namespace = ref.namespace or None
        current = await kube.get(self._client, resource, ref.name, namespace=namespace)
        have = _status_of(current)
        want = desired(ref, wanted, have, self._controller, self._now())
        if shows(ref, have, want):
            return False
        version = (current.get("metadata") or {}).get("resourceVersion")
        await write_status(
            self._client,
            resource,
            ref.name,
            {"status": merge_patch(have, want)},
            namespace=namespace,
            resource_version=version,
            status=True,
        )
        return True


def _status_of(obj: Mapping[str, Any]) -> Status:
    status = obj.get("status")
    return status if isinstance(status, Mapping) else {}


def _fields(ref: ObjectRef, e: Exception) -> dict[str, str]:
    return {"kind": ref.kind, "namespace": ref.namespace, "name": ref.name, "error": str(e)}
