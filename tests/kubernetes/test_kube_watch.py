"""ferryman.kube.watch against the real API server: a watch whose version was
compacted away (410 Gone) lists again and goes on watching.

(The API server answers a watch from its watch cache: a version is gone once
older than what the cache holds, as after compaction and a restart.)"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.config.kubeconfig import KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap, Namespace

from ferryman.kube.errors import Gone
from ferryman.kube.watch import Backoff, Listing, Query, informer
from testkit.apiserver import APIServer, wait_until


class FirstListFromTheEarlier:
    """The client, with its first list answering an earlier (compacted) version:
    as if the watch had been down while the server compacted."""

    def __init__(self, client: AsyncClient, earlier: str) -> None:
        self._client = client
        self._earlier: str | None = earlier

    def list(self, *args: Any, **kwargs: Any) -> Any:
        listing = self._client.list(*args, **kwargs)
        earlier, self._earlier = self._earlier, None
        if earlier is None:
            return listing
        return _Versioned(listing, earlier)

    def watch(self, *args: Any, **kwargs: Any) -> Any:
        return self._client.watch(*args, **kwargs)


class _Versioned:
    def __init__(self, listing: Any, version: str) -> None:
        self._listing = listing
        self.resourceVersion = version

    def __aiter__(self) -> Any:
        return self._listing.__aiter__()


def test_a_watch_from_a_compacted_version_lists_again(
    tmp_path: Path, apiserver_binary: Path
) -> None:
    server = APIServer(
        apiserver_binary, tmp_path / "compacting", "--etcd-compaction-interval", "2s"
    )
    server.start()
    try:
        kube = server.client()
        kube.create(Namespace(metadata=ObjectMeta(name="w")))
        kube.create(ConfigMap(metadata=ObjectMeta(name="a", namespace="w")))
        earlier = str(kube.get(ConfigMap, "a", namespace="w").metadata.resourceVersion)  # type: ignore[union-attr]
        for i in range(20):  # move the revision past it, then let compaction run
            kube.create(ConfigMap(metadata=ObjectMeta(name=f"c{i}", namespace="w")))

        def compacted() -> bool:
            """etcd no longer has the earlier version (compaction runs every 2 s; a
            fixed 3 s was not always enough on a loaded machine)."""
            exact = {"resourceVersion": earlier, "resourceVersionMatch": "Exact"}
            try:
                list(kube._client.request("list", res=ConfigMap, namespace="w", params=exact))
            except ApiError as e:
                return e.status.code == 410
            return False

        wait_until(compacted, 60, "etcd compacted past the earlier version")
        # A restarted server's watch cache starts after it: that version is gone.
        server.stop()
        server.start()
        kube = server.client()

        lists: list[set[str]] = []
        errors: list[Exception] = []
        events: list[tuple[str, str]] = []

        async def go() -> None:
            client = AsyncClient(config=KubeConfig.from_file(server.kubeconfig))

            async def listed(listing: Listing) -> None:
                lists.append({o.metadata.name async for o in listing})

            async def event(kind: str, obj: Any) -> None:
                events.append((kind, obj.metadata.name))

            def failed(e: Exception) -> None:
                errors.append(e)

            task = asyncio.create_task(
                informer(
                    FirstListFromTheEarlier(client, earlier),  # type: ignore[arg-type]
                    Query(ConfigMap, namespace="w"),
                    event,
                    failed,
                    Backoff(0.05, 0.1),
                    on_list=listed,
                )
            )
            try:
                deadline = time.monotonic() + 60
                while len(lists) < 2:
                    assert time.monotonic() < deadline, (lists, errors)
                    await asyncio.sleep(0.05)
                await asyncio.to_thread(
                    kube.create, ConfigMap(metadata=ObjectMeta(name="b", namespace="w"))
                )
                while ("ADDED", "b") not in events:
                    assert time.monotonic() < deadline, (events, errors)
                    await asyncio.sleep(0.05)
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                await client.close()

        asyncio.run(go())
        assert isinstance(errors[0], Gone), errors
        assert errors[0].status == 410
        assert len(lists) == 2
        assert {"a", "c19"} <= lists[1]
    finally:
        server.stop()
