"""The HTTPS server the API server calls with each opted-in pod's creation.

Started once the caches have synced (app/root.py): an answer before that would leave
out gates of Services not yet read. It serves the Secret's certificate, follows
the Secret when it changes (cert-manager renewing it, or it being deleted: then
a new one is made), and keeps the configuration's caBundle on the Secret's CA.
Certificate or API trouble is logged and retried, and never stops ferryman:
routing matters more than gates.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Callable, Sequence

from aiohttp import web

from ferryman.kube.resources import AsyncClient, Secret
from ferryman.webhook.admission import Injector
from ferryman.webhook.certificate import Bundle, CertificateError, from_secret_data
from ferryman.webhook.cluster import (
    RETRY_MAX,
    RETRY_MIN,
    CertificateSecret,
    ensure_ca_bundle,
    keep_ca_bundle,
)
from ferryman.webhook.reviews import MAX_BODY, Reviews

log = logging.getLogger("ferryman.webhook")

PATH = "/readiness-gates"


class WebhookServer:
    def __init__(
        self,
        port: int | Sequence[socket.socket],
        injector: Injector,
        client: AsyncClient,
        secret: CertificateSecret,
        configuration: str | None,
        count: Callable[[str], None],
    ) -> None:
        """``configuration``: the MutatingWebhookConfiguration whose caBundle
        ferryman keeps (None: someone else keeps it). ``count(result)``: each
        review's result (admission.INJECTED, UNCHANGED, ERROR). ``port``: or
        the sockets already bound to it, IPv4 and IPv6 (app/root.py binds them
        before NGINX's listeners open, so no listener can take it first)."""
        self._port = port
        self._reviews = Reviews(injector, count)
        self._client = client
        self._secret = secret
        self._configuration = configuration
        self._bundle: Bundle | None = None

    async def run(self) -> None:
        """Serves until cancelled; a port that cannot be bound ends it (and
        ferryman): that is a setting to fix, not trouble to wait out."""
        self._bundle, context = await self._first_bundle()
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_post(PATH, self._reviews.handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        try:
            port = self._port
            if isinstance(port, int):
                await web.TCPSite(runner, "0.0.0.0", port, ssl_context=context).start()
            else:
                for sock in port:
                    await web.SockSite(runner, sock, ssl_context=context).start()
                port = port[0].getsockname()[1]
            log.info("readiness gate webhook listening", extra={"fields": {"port": port}})
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self._secret.watch(lambda s: self._secret_changed(s, context)))
                if self._configuration:
                    tg.create_task(keep_ca_bundle(self._client, self._configuration, self._ca))
        finally:
            await runner.cleanup()

    def _ca(self) -> bytes:
        assert self._bundle is not None
        return self._bundle.ca

    async def _first_bundle(self) -> tuple[Bundle, ssl.SSLContext]:
        delay = RETRY_MIN
        while True:
            try:
                bundle = await self._secret.obtain()
                return bundle, bundle.ssl_context()
            except Exception as e:  # RBAC, API down, an unusable Secret: retried
                log.error(
                    "readiness gate webhook: no certificate yet; trying again",
                    extra={"fields": {"secret": self._where(), "error": str(e)}},
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX)

    def _where(self) -> str:
        return f"{self._secret.namespace}/{self._secret.name}"

    async def _secret_changed(self, secret: Secret | None, context: ssl.SSLContext) -> None:
        """Serve, and have trusted, what the Secret holds now (deleted: a new one)."""
        try:
            bundle = (
                await self._secret.obtain() if secret is None else from_secret_data(secret.data)
            )
            if bundle != self._bundle:
                bundle.ssl_context()  # loads on its own before it replaces what is served
        except CertificateError as e:
            log.error(
                "readiness gate webhook: the Secret's certificate is unusable; "
                "serving the previous one",
                extra={"fields": {"secret": self._where(), "error": str(e)}},
            )
            return
        if bundle != self._bundle:
            bundle.load_into(context)
            self._bundle = bundle
            log.info("readiness gate webhook: serving the Secret's new certificate",
                     extra={"fields": {"secret": self._where()}})  # fmt: skip
        # Also when unchanged: a watch re-made after a failed patch comes back
        # here with the same Secret, and the caBundle must still follow it.
        if self._configuration:
            await ensure_ca_bundle(self._client, self._configuration, bundle.ca)
