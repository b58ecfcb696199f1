"""The validating admission webhook for Machines: hooks freeze once deletion starts.

A hook added after the machine controller has passed its point would never
be waited for, so, as the Machine API's webhook does, an update of a Machine
marked for deletion that adds or changes a hook is refused; removing hooks
(how their owners release the Machine) is allowed. Served over HTTPS (the
API server calls webhooks only so) at ``PATH``; the rule is ``hooks.py``'s.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from pathlib import Path
from typing import Any

from aiohttp import web

from ferryman.machines.hooks import immutability_problems

log = logging.getLogger("ferryman.machines")

# The Machine API's path for its Machine validating webhook.
PATH = "/validate-machine-openshift-io-v1beta1-machine"


def denial(problems: list[str]) -> str:
    """As Go's aggregate error prints several: one alone, else ``[a, b]``."""
    return problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"


def review(body: Any) -> dict[str, Any]:
    """The AdmissionReview answering ``body`` (admission.k8s.io/v1)."""
    request = body.get("request") if isinstance(body, dict) else None
    if not isinstance(request, dict):
        raise ValueError("not an AdmissionReview request")
    response: dict[str, Any] = {"uid": request.get("uid", ""), "allowed": True}
    old, new = request.get("oldObject"), request.get("object")
    update = request.get("operation") == "UPDATE"
    both = isinstance(old, dict) and isinstance(new, dict)
    problems = immutability_problems(old or {}, new or {}) if update and both else []
    if problems:
        response["allowed"] = False
        response["status"] = {"code": 403, "reason": "Forbidden", "message": denial(problems)}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


async def _handle(request: web.Request) -> web.Response:
    try:
        answer = review(await request.json())
    except ValueError as e:
        return web.Response(status=400, text=str(e))
    return web.json_response(answer)


async def serve(port: int, cert_file: Path, key_file: Path, address: str = "0.0.0.0") -> None:
    """Serve until cancelled."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    app = web.Application()
    app.router.add_post(PATH, _handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, address, port, ssl_context=context)
    await site.start()
    log.info("webhook serving", extra={"fields": {"port": port, "path": PATH}})
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
