"""An NGINX that died without being asked to: started again and refilled.

NGINX's memory (the records) dies with it, so after a restart everything is
pushed again; NGINX restarts without its public listeners until the records are
back (Angie's configuration is all in files and comes back whole). When the
listeners stay closed (the push or the reload reopening them failed, say a port
taken meanwhile) everything is pushed again, backing off, since no resource
change may come to retry it. Apart from the composition root, which only starts
this as one of its tasks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from ferryman.dataplane.errors import DataPlaneError
from ferryman.dataplane.nginx import NginxManager
from ferryman.observability.metrics import Metrics

log = logging.getLogger("ferryman")

# A full push of 10,000 hosts takes seconds; a restarted NGINX whose listeners
# are still closed this long after is pushed everything again: the push or the
# reload that reopens them failed (a port taken meanwhile), and no resource
# change may come to retry it.
REOPEN_CHECK = 5.0
REOPEN_CHECK_MAX = 60.0


async def keep_nginx_alive(
    nginx: NginxManager,
    resend_everything: Callable[[], None],
    metrics: Metrics,
    closed_main: str | None,
) -> None:
    """NGINX died without being asked to: start it again and refill its memory
    (``resend_everything``: the controller's next flush pushes every record).

    ``closed_main``: NGINX (whose memory the records fill) restarts as it starts,
    without public listeners until the records are back; Angie's configuration
    is all in files, so it comes back whole with them.
    """
    while True:
        code = await nginx.wait_exit()
        log.error("nginx exited unexpectedly; restarting it", extra={"fields": {"code": code}})
        metrics.nginx_restarts.inc()
        try:
            await nginx.restart(closed_main)
        except DataPlaneError as e:
            log.error("nginx failed to restart", extra={"fields": {"error": str(e)}})
            await asyncio.sleep(1)
            continue
        resend_everything()
        await _until_reopened(nginx, resend_everything)


async def _until_reopened(nginx: NginxManager, resend_everything: Callable[[], None]) -> None:
    """Returns once the restarted NGINX has its listeners, or has died again."""
    delay = REOPEN_CHECK
    while nginx.listeners_closed:
        try:
            await asyncio.wait_for(nginx.wait_exit(), delay)
            return
        except TimeoutError:
            pass
        if nginx.listeners_closed:
            log.warning(
                "nginx listeners still closed after the restart; pushing everything again",
                extra={"fields": {"waited": delay}},
            )
            resend_everything()
            delay = min(delay * 2, REOPEN_CHECK_MAX)
