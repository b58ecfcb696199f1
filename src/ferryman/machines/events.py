"""events.k8s.io/v1 Events about Machines, with the Machine API's reasons and actions."""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Mapping
from typing import Any

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.models.core_v1 import ObjectReference
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.events_v1 import Event

log = logging.getLogger("ferryman.machines")

REPORTING_CONTROLLER = "ferryman.io/machine-controller"
API_VERSION = "machine.openshift.io/v1beta1"


class EventWriter:
    def __init__(
        self, client: AsyncClient, instance: str, controller: str = REPORTING_CONTROLLER
    ) -> None:
        """``controller``: the reportingController (ferryman's hooks write as the
        ingress controller, the reference machine controller as itself)."""
        self._client = client
        self._instance = instance
        self._controller = controller

    async def emit(
        self,
        machine: Mapping[str, Any],
        reason: str,
        note: str,
        action: str = "Drain",
        type_: str = "Normal",
    ) -> None:
        """An event (``type_``: Normal or Warning); a failure to write one is
        logged, never fatal."""
        md = machine.get("metadata") or {}
        log.info(
            "event",
            extra={
                "fields": {
                    "machine": f"{md.get('namespace')}/{md.get('name')}",
                    "reason": reason,
                    "type": type_,
                    "note": note,
                }
            },
        )
        try:
            await self._client.create(
                Event(
                    metadata=ObjectMeta(
                        name=f"{md.get('name')}.{time.time_ns():x}", namespace=md.get("namespace")
                    ),
                    eventTime=datetime.datetime.now(datetime.UTC),
                    reportingController=self._controller,
                    reportingInstance=self._instance,
                    action=action,
                    reason=reason,
                    note=note[:1024],
                    type=type_,
                    regarding=ObjectReference(
                        apiVersion=str(machine.get("apiVersion") or API_VERSION),
                        kind="Machine",
                        namespace=md.get("namespace"),
                        name=md.get("name"),
                        uid=md.get("uid"),
                    ),
                )
            )
        except ApiError as e:
            log.warning("event not written", extra={"fields": {"reason": reason, "error": str(e)}})
