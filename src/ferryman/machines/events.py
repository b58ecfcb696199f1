"""events.k8s.io/v1 Events about Machines, with the Machine API's reasons and actions."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ferryman.kube.errors import KubeError
from ferryman.kube.resources import AsyncClient
from ferryman.kube.writers import Regarding, Reporter, write_event

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
        self._reporter = Reporter(controller, instance)

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
        regarding = Regarding(
            str(machine.get("apiVersion") or API_VERSION),
            "Machine",
            md.get("namespace"),
            md.get("name"),
            md.get("uid"),
        )
        try:
            await write_event(
                self._client, self._reporter, regarding,
                action=action, reason=reason, note=note, type_=type_,
            )  # fmt: skip
        except KubeError as e:
            log.warning("event not written", extra={"fields": {"reason": reason, "error": str(e)}})
