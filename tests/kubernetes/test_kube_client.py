"""ferryman.kube.client against the real API server: the Pod watches' client
(``many_watches``) keeps answering when one of its watches is cancelled while
the others stream, as a namespace opting out, a watch restart or a stop does.

On the HTTP/2 client it used before, the request after such a cancellation
waited for ever in most tries (and ferryman's stop with it: a CI run's
controller was SIGKILLed 30 s after its workers were cancelled)."""

from __future__ import annotations

import asyncio
import random

from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap

from ferryman.kube.client import make_client
from testkit.apiserver import APIServer

ROUNDS = 15
WATCHES = 4
# Each step takes milliseconds; a stuck request never ends. Long enough for a
# loaded machine, short enough for the test to say which step stuck.
STUCK = 20.0


async def _round(kubeconfig: str, namespace: str, mark: str) -> None:
    client = make_client(kubeconfig, many_watches=True)
    seen = [asyncio.Event() for _ in range(WATCHES)]

    async def watch(i: int) -> None:
        async for _, cm in client.watch(ConfigMap, namespace=namespace):
            if (cm.data or {}).get("round") == mark:
                seen[i].set()

    watches = [asyncio.create_task(watch(i)) for i in range(WATCHES)]
    await asyncio.sleep(random.uniform(0.01, 0.3))
    watches[0].cancel()
    patch = {"data": {"round": mark}}
    await asyncio.wait_for(client.patch(ConfigMap, "c", patch, namespace=namespace), STUCK)
    # The other watches still deliver.
    for i in range(1, WATCHES):
        await asyncio.wait_for(seen[i].wait(), STUCK)
    for w in watches:
        w.cancel()
    _, pending = await asyncio.wait(watches, timeout=STUCK)
    assert not pending, f"round {mark}: a cancelled watch did not end"
    await client.close()


def test_cancelling_one_watch_leaves_the_others_and_the_next_request_working(
    apiserver: APIServer, namespace: str
) -> None:
    async def scenario() -> None:
        setup = make_client(apiserver.kubeconfig)
        await setup.create(ConfigMap(metadata=ObjectMeta(name="c", namespace=namespace)))
        for round_ in range(ROUNDS):
            await _round(apiserver.kubeconfig, namespace, str(round_))
        await setup.close()

    asyncio.run(scenario())
