"""What ferryman writes about objects: events.k8s.io/v1 Events and status
subresource patches, those guarded by a resourceVersion among them.

The texts (reasons, notes, actions) are the callers'; here is only how they
reach the API, with its errors mapped (``errors``).

NIC's own RBAC (its manifests' and chart's ClusterRole, which ferryman runs under
when only NIC's image is changed) grants core-group Events, not events.k8s.io,
and ``update`` of status subresources, not ``patch``: each write falls back to
what is granted, and says so once.
"""

from __future__ import annotations

import datetime
import logging
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lightkube import AsyncClient
from lightkube.models.core_v1 import EventSource, ObjectReference
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources import core_v1
from lightkube.resources.events_v1 import Event

from ferryman.kube import client as kube
from ferryman.kube.errors import Conflict, Forbidden

log = logging.getLogger("ferryman.kubernetes")

# The API server refuses a longer note.
NOTE_MAX = 1024


@dataclass(frozen=True)
class Regarding:
    """The object an Event is about."""

    api_version: str | None
    kind: str
    namespace: str | None
    name: str | None
    uid: str | None


@dataclass(frozen=True)
class Reporter:
    """Who writes Events: reportingController and reportingInstance."""

    controller: str
    instance: str


async def write_event(
    client: AsyncClient,
    reporter: Reporter,
    regarding: Regarding,
    *,
    action: str,
    reason: str,
    note: str,
    type_: str,
) -> None:
    """One Event (``type_``: Normal or Warning), in the object's namespace:
    events.k8s.io/v1, or a core v1 Event where RBAC grants only those."""
    # client-go's naming: the object's name and a unique suffix.
    name = f"{regarding.name}.{time.time_ns():x}"
    metadata = ObjectMeta(name=name, namespace=regarding.namespace)
    now = datetime.datetime.now(datetime.UTC)
    target = ObjectReference(
        apiVersion=regarding.api_version,
        kind=regarding.kind,
        namespace=regarding.namespace,
        name=regarding.name,
        uid=regarding.uid,
    )
    event: Any = Event(
        metadata=metadata,
        eventTime=now,
        reportingController=reporter.controller,
        reportingInstance=reporter.instance,
        action=action,
        reason=reason,
        note=note[:NOTE_MAX],
        type=type_,
        regarding=target,
    )
    if client not in _core_events:
        try:
            await kube.create(client, event)
            return
        except Forbidden:
            _core_events.add(client)
            log.info("RBAC grants core v1 Events, not events.k8s.io: writing v1 Events")
    event = core_v1.Event(
        metadata=metadata,
        involvedObject=target,
        reason=reason,
        message=note[:NOTE_MAX],
        type=type_,
        action=action,
        source=EventSource(component=reporter.controller),
        reportingComponent=reporter.controller,
        reportingInstance=reporter.instance,
        # eventTime, as events.k8s.io writes it: readers of either API see the
        # same Event (events.k8s.io/v1 requires it).
        eventTime=now,
    )
    await kube.create(client, event)


# Clients whose RBAC refused an events.k8s.io Event (NIC's grants core Events):
# they write core v1 Events, the same objects to every reader.
_core_events: weakref.WeakSet[AsyncClient] = weakref.WeakSet()
# Status subresources (by plural) whose patch RBAC refused (NIC's grants update).
_status_updated: set[str] = set()
# Reads and updates of one status before a conflict is the caller's.
_UPDATE_ATTEMPTS = 3


async def merge_patch(
    client: AsyncClient,
    resource: Any,
    name: str,
    body: Mapping[str, Any],
    *,
    namespace: str | None = None,
    resource_version: str | None = None,
    status: bool = False,
) -> Any:
    """A JSON merge patch of the object (``status``: of its status subresource).
    ``resource_version``: it holds only against that version; a change since
    fails with ``Conflict`` (a merge patch alone never conflicts). A status whose
    patch RBAC refuses is read and updated instead (the read's version guards it)."""
    if resource_version is not None:
        metadata = {**body.get("metadata", {}), "resourceVersion": resource_version}
        body = {**body, "metadata": metadata}
    target = resource.Status if status else resource
    plural = str(resource._api_info.plural)
    if not status or plural not in _status_updated:
        try:
            return await kube.patch(client, target, name, body, namespace=namespace)
        except Forbidden:
            if not status:
                raise
            _status_updated.add(plural)
            log.info(
                "RBAC grants update, not patch, of status: status is read and updated",
                extra={"fields": {"resource": f"{plural}/status"}},
            )
    for attempt in range(_UPDATE_ATTEMPTS):
        current = await kube.get(client, resource, name, namespace=namespace)
        merged = merged_into(current.to_dict(), body)
        try:
            return await kube.replace(client, target.from_dict(merged))
        except Conflict:
            # The read's version guards the update; a change since (a user's edit)
            # is read again, as a patch would not have noticed it. A caller's own
            # guard (``resource_version``) is theirs to handle.
            if resource_version is not None or attempt == _UPDATE_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def merged_into(doc: Any, patch: Any) -> Any:
    """``patch`` applied to ``doc`` as a JSON merge patch (RFC 7386): objects
    merge, null deletes, anything else replaces."""
    if not isinstance(patch, Mapping):
        return patch
    out = dict(doc) if isinstance(doc, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merged_into(out.get(key), value)
    return out
