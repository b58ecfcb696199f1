"""Reading the AdmissionReviews the webhook is sent, off the controller's event loop.

Whoever reaches the webhook port can send up to ``MAX_BODY``; the webhook shares
the event loop with the controller (its queue, pushes, leases). So bodies are read
and parsed at most ``PARSE_SLOTS`` at a time, and parsed in a thread. Above the cap
a review waits for a slot rather than being refused: a refused review costs the
pod its gate (``failurePolicy: Ignore``), and a burst of pod creations is the
normal case (a Deployment scaling up); the API server's ``timeoutSeconds`` bounds
the wait, and an unread body holds only its connection, so memory stays at most
``PARSE_SLOTS`` bodies. json's C decoder keeps the GIL while it runs: the worst
3 MiB body measured (a million small objects) held it 58 ms, so the thread bounds
how often, not how long, the loop waits. A body nested too deeply for the decoder
(RecursionError) or not JSON is answered 400 and logged as a warning, never a 500
with a traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable

from aiohttp import web

from ferryman.webhook.admission import ERROR, Injector

log = logging.getLogger("ferryman.webhook")

# The API server accepts requests up to 3 MiB, so no pod it creates is larger;
# aiohttp refuses a larger body (413) before reading it all.
MAX_BODY = 3 * 1024 * 1024
# Parses at once: the machine's two cores, and at most 6 MiB of bodies held.
PARSE_SLOTS = 2


def parse(body: bytes) -> object:
    """The document, or ValueError saying why there is none."""
    try:
        return json.loads(body)
    except RecursionError as e:
        raise ValueError("nested too deeply") from e
    except ValueError as e:  # JSON, or UTF-8, it is not
        raise ValueError("not JSON") from e


class Reviews:
    """The webhook's request handler: ``handle`` answers one review."""

    def __init__(
        self, injector: Injector, count: Callable[[str], None], slots: int = PARSE_SLOTS
    ) -> None:
        self._injector = injector
        self._count = count
        self._slots = asyncio.Semaphore(slots)

    async def handle(self, request: web.Request) -> web.Response:
        async with self._slots:
            try:
                body = await request.read()
            except web.HTTPRequestEntityTooLarge:
                self._refused("too large")
                raise
            try:
                document = await asyncio.to_thread(parse, body)
            except ValueError as e:
                self._refused(str(e))
                return web.json_response({"error": str(e)}, status=400)
        # The Injector reads the controller's cache, which only the loop may touch.
        outcome = self._injector.review(document)
        self._count(outcome.result)
        if outcome.result == ERROR:
            log.warning(
                "readiness gate webhook: review failed",
                extra={"fields": {"reason": outcome.reason}},
            )
        if outcome.review is None:
            return web.json_response({"error": outcome.reason}, status=400)
        return web.json_response(outcome.review)

    def _refused(self, reason: str) -> None:
        self._count(ERROR)
        log.warning("readiness gate webhook: review refused", extra={"fields": {"reason": reason}})
