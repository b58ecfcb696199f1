"""Every reload of the data plane, counted, timed and logged in one place.

Both flavours reload only through ``NginxManager.apply`` (the NGINX flavour for
its own settings, Angie also for hosts, paths, certificates and a backend's
0 <-> N endpoints), which reports each attempt here with its reason, so NIC's
reload metrics and the reload log line cover every reload whoever asked for it.
"""

from __future__ import annotations

import logging
from typing import Protocol

from ferryman.observability.metrics import Metrics

log = logging.getLogger("ferryman.nginx")

# NIC's reasons (the ``reason`` label of nginx_reloads_total): a reload caused
# only by endpoint changes, or by anything else.
ENDPOINTS = "endpoints"
OTHER = "other"


class ReloadObserver(Protocol):
    def reloaded(self, reason: str, seconds: float) -> None:
        """A reload the data plane confirmed, ``seconds`` from test to confirmation."""
        ...

    def reload_failed(self, reason: str, error: str) -> None:
        """A reload refused by the test, or not confirmed; the old configuration serves."""
        ...


class ReloadLog:
    """Reloads into NIC's metrics and one log line each."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def reloaded(self, reason: str, seconds: float) -> None:
        self._metrics.reloads.labels(reason=reason).inc()
        self._metrics.last_reload_status.set(1)
        self._metrics.last_reload_ms.set(round(seconds * 1000))
        self._metrics.reload_seconds.observe(seconds)
        log.info(
            "nginx reloaded",
            extra={"fields": {"reason": reason, "result": "success", "seconds": round(seconds, 3)}},
        )

    def reload_failed(self, reason: str, error: str) -> None:
        self._metrics.reload_errors.inc()
        self._metrics.last_reload_status.set(0)
        log.error(
            "nginx reload failed",
            extra={"fields": {"reason": reason, "result": "error", "error": error}},
        )
