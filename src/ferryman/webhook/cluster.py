"""The webhook's API calls: its certificate's Secret and the configuration's caBundle.

Every replica serves the same certificate, the Secret's: the first to find it
absent makes one and creates the Secret; a replica whose create conflicts lost
that race and reads the winner's. Each replica then keeps the caBundle of every
webhook in the MutatingWebhookConfiguration equal to the Secret's CA: a no-op
once one has, so replicas never fight, and a configuration re-applied without
it (``helm upgrade``, ``kubectl apply``) gets it back within a watch event.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ferryman.kube import client as kube
from ferryman.kube.errors import Conflict, NotFound
from ferryman.kube.resources import (
    AsyncClient,
    MutatingWebhookConfiguration,
    ObjectMeta,
    PatchType,
    Secret,
)
from ferryman.kube.watch import Backoff, Query, informer
from ferryman.webhook.certificate import Bundle, from_secret_data, generate

log = logging.getLogger("ferryman.webhook")

# Backoff between tries after an API error: quick first, capped.
RETRY_MIN = 0.5
RETRY_MAX = 30.0


class CertificateSecret:
    def __init__(
        self, client: AsyncClient, namespace: str, name: str, hosts: Sequence[str]
    ) -> None:
        """``hosts``: the names (or addresses) a made certificate is for: how the
        API server reaches the webhook (its Service's ``NAME.NAMESPACE.svc``)."""
        self._client = client
        self.namespace = namespace
        self.name = name
        self._hosts = tuple(hosts)

    async def obtain(self) -> Bundle:
        """The Secret's bundle; made and stored first when there is no Secret.
        Raises KubeError, CertificateError (a Secret whose data is unusable is
        never replaced: someone else may own it)."""
        secret = await self._get()
        if secret is not None:
            return from_secret_data(secret.data)
        if not self._hosts:
            raise ValueError(
                f"Secret {self.namespace}/{self.name} is absent and no host is known to "
                "make a certificate for (--readiness-gate-webhook-cert-hosts)"
            )
        bundle = await asyncio.to_thread(generate, self._hosts)
        try:
            await kube.create(
                self._client,
                Secret(
                    metadata=ObjectMeta(
                        name=self.name,
                        namespace=self.namespace,
                        labels={"app.kubernetes.io/managed-by": "ferryman"},
                    ),
                    type="kubernetes.io/tls",
                    data=bundle.secret_data(),
                ),
            )
        except Conflict:
            secret = await self._get()  # another replica created it first
            if secret is None:
                raise
            return from_secret_data(secret.data)
        log.info(
            "readiness gate webhook: made a certificate",
            extra={
                "fields": {
                    "secret": f"{self.namespace}/{self.name}",
                    "hosts": ",".join(self._hosts),
                }
            },
        )
        return bundle

    async def _get(self) -> Secret | None:
        try:
            return await kube.get(self._client, Secret, self.name, namespace=self.namespace)
        except NotFound:
            return None

    async def watch(self, changed: Callable[[Secret | None], Awaitable[None]]) -> None:
        """Calls ``changed`` with the Secret on each change (None: deleted)."""
        await watch_named(self._client, Secret, self.name, self.namespace, changed)


async def keep_ca_bundle(client: AsyncClient, name: str, ca: Callable[[], bytes]) -> None:
    """Keeps every webhook of configuration ``name`` trusting ``ca()``, forever."""

    async def changed(config: MutatingWebhookConfiguration | None) -> None:
        if config is not None:
            # Read afresh: a watch may deliver an older version after the write
            # that put the caBundle back, which would write it a second time.
            await ensure_ca_bundle(client, name, ca())

    await watch_named(client, MutatingWebhookConfiguration, name, None, changed)


async def ensure_ca_bundle(
    client: AsyncClient, config: MutatingWebhookConfiguration | str, ca: bytes
) -> None:
    """Sets the caBundle of the webhooks of ``config`` (the object or its name)
    that do not have ``ca``; writes nothing when all do."""
    if isinstance(config, str):
        try:
            config = await kube.get(client, MutatingWebhookConfiguration, config)
        except NotFound:
            return  # the watch sets it once the configuration exists
    assert config.metadata is not None and config.metadata.name is not None
    want = base64.b64encode(ca).decode()
    stale = [w.name for w in config.webhooks or () if w.clientConfig.caBundle != want]
    if not stale:
        # Debug: a watch's every (re)start checks; what a test of "writes
        # nothing" waits for, rather than for time.
        log.debug(
            "readiness gate webhook: caBundle current",
            extra={"fields": {"configuration": config.metadata.name}},
        )
        return
    # Strategic merge: webhooks merge by name, so only those entries' caBundle
    # changes, whatever else the owner of the configuration set.
    patch = {"webhooks": [{"name": n, "clientConfig": {"caBundle": want}} for n in stale]}
    await kube.patch(
        client, MutatingWebhookConfiguration, config.metadata.name, patch,
        patch_type=PatchType.STRATEGIC,
    )  # fmt: skip
    log.info(
        "readiness gate webhook: caBundle set",
        extra={"fields": {"configuration": config.metadata.name, "webhooks": ",".join(stale)}},
    )


async def watch_named(
    client: AsyncClient,
    resource: Any,
    name: str,
    namespace: str | None,
    changed: Callable[[Any], Awaitable[None]],
) -> None:
    """Watches one object by name, forever: ``changed(obj)`` for its current
    state and each change, ``changed(None)`` when it is deleted. A watch made
    without a resourceVersion starts with the object as it is, so a re-made
    watch (after an error or the server's timeout) misses nothing."""

    async def event(kind: str, obj: Any) -> None:
        await changed(None if kind == "DELETED" else obj)

    def failed(e: Exception) -> None:  # the webhook outlives any API or network failure
        log.warning(
            "readiness gate webhook: watch or update failed; trying again",
            extra={"fields": {"kind": resource.__name__, "name": name, "error": str(e)}},
        )

    await informer(
        client,
        Query(resource, namespace=namespace, fields={"metadata.name": name}),
        event,
        failed,
        Backoff(RETRY_MIN, RETRY_MAX),
        pause_after_end=True,
    )
