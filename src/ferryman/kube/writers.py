"""What ferryman writes about objects: events.k8s.io/v1 Events and status
subresource patches, those guarded by a resourceVersion among them.

The texts (reasons, notes, actions) are the callers'; here is only how they
reach the API, with its errors mapped (``errors``).
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lightkube import AsyncClient
from lightkube.models.core_v1 import ObjectReference
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.events_v1 import Event

from ferryman.kube import client as kube

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
    """One Event (``type_``: Normal or Warning), in the object's namespace."""
    await kube.create(
        client,
        Event(
            # client-go's naming: the object's name and a unique suffix.
            metadata=ObjectMeta(
                name=f"{regarding.name}.{time.time_ns():x}", namespace=regarding.namespace
            ),
            eventTime=datetime.datetime.now(datetime.UTC),
            reportingController=reporter.controller,
            reportingInstance=reporter.instance,
            action=action,
            reason=reason,
            note=note[:NOTE_MAX],
            type=type_,
            regarding=ObjectReference(
                apiVersion=regarding.api_version,
                kind=regarding.kind,
                namespace=regarding.namespace,
                name=regarding.name,
                uid=regarding.uid,
            ),
        ),
    )


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
    fails with ``Conflict`` (a merge patch alone never conflicts)."""
    if resource_version is not None:
        metadata = {**body.get("metadata", {}), "resourceVersion": resource_version}
        body = {**body, "metadata": metadata}
    target = resource.Status if status else resource
    return await kube.patch(client, target, name, body, namespace=namespace)
