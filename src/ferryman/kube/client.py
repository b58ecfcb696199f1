"""The API client, and the calls ferryman makes with the API's errors mapped
to its own (``errors``): a caller catches ``NotFound``, never compares 404."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from typing import Any, TypeVar

import httpx2
from lightkube import AsyncClient
from lightkube.config.client_adapter import verify_cluster
from lightkube.config.kubeconfig import KubeConfig
from lightkube.types import PatchType

from ferryman.kube.errors import mapped

R = TypeVar("R")


class KubeconfigError(ValueError):
    """No usable configuration to reach the Kubernetes API."""


def make_client(kubeconfig: str | None, *, many_watches: bool = False) -> AsyncClient:
    """From ``--kubeconfig``, else ``KUBECONFIG``/~/.kube/config, else in-cluster.

    ``many_watches``: a connection per request with no cap (the Pod watches, one
    per opted-in namespace, each holds its connection; the default pool stops at
    100). Not HTTP/2, which would carry them all on one connection: with the
    HTTP/2 client lightkube uses (httpcore2 2.16), a watch cancelled while others
    stream on the connection (a namespace opted out, a watch restarted, a stop)
    can leave the next request on it waiting for ever, and a stop with it
    (reproduced: one watch of four cancelled, then a PATCH never answered, in
    most tries; never over HTTP/1.1)."""
    try:
        config = KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()
        return AsyncClient(
            config=config,
            field_manager="ferryman",
            transport=_uncapped(config) if many_watches else None,
        )
    # lightkube lets through whatever reading a malformed file raises (YAML
    # errors, KeyError, AttributeError): each is a configuration ferryman cannot use.
    except Exception as e:
        where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config or in-cluster"
        reason = " ".join(str(e).split())
        raise KubeconfigError(
            f"no usable kubeconfig ({where}): {type(e).__name__}: {reason}"
        ) from e


def _uncapped(config: KubeConfig) -> httpx2.AsyncHTTPTransport:
    """lightkube's TLS set-up (CA, client certificate) on a pool of no fixed size.
    httpx2 is lightkube's HTTP client (a dependency of it, pinned with it in
    uv.lock): lightkube takes a transport but no pool limits."""
    single = config.get()
    assert single is not None and single.user is not None
    verify = verify_cluster(single.cluster, single.user, single.abs_file)
    limits = httpx2.Limits(max_connections=None, max_keepalive_connections=20)
    return httpx2.AsyncHTTPTransport(verify=verify, limits=limits)


def _raw(client: AsyncClient) -> Any:
    """The client untyped: lightkube's overloads know its own resource types
    only, and these helpers pass each caller's type through."""
    return client


async def get(client: AsyncClient, res: type[R], name: str, *, namespace: str | None = None) -> R:
    with mapped():
        found: R = await _raw(client).get(res, name, namespace=namespace)
    return found


async def create(
    client: AsyncClient, obj: R, name: str | None = None, *, namespace: str | None = None
) -> R:
    """``name``, ``namespace``: of the parent, for a subresource (a Pod's Eviction)."""
    with mapped():
        if name is None and namespace is None:
            made: R = await _raw(client).create(obj)
        else:
            made = await _raw(client).create(obj, name, namespace=namespace)
    return made


async def replace(client: AsyncClient, obj: R) -> R:
    with mapped():
        done: R = await _raw(client).replace(obj)
    return done


async def patch(
    client: AsyncClient,
    res: type[R],
    name: str,
    body: Mapping[str, Any],
    *,
    namespace: str | None = None,
    patch_type: PatchType = PatchType.MERGE,
) -> R:
    with mapped():
        patched: R = await _raw(client).patch(
            res, name, dict(body), namespace=namespace, patch_type=patch_type
        )
    return patched


async def delete(
    client: AsyncClient, res: type[Any], name: str, *, namespace: str | None = None
) -> None:
    with mapped():
        await _raw(client).delete(res, name, namespace=namespace)


async def items(
    client: AsyncClient,
    res: type[R],
    *,
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
    fields: Mapping[str, str] | None = None,
) -> AsyncIterator[R]:
    """Every object a list answers (paged by lightkube), errors mapped."""
    with mapped():
        async for obj in _raw(client).list(
            res,
            namespace=namespace,
            labels=dict(labels) if labels else None,
            fields=dict(fields) if fields else None,
        ):
            yield obj
