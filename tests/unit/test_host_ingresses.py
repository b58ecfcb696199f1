"""HostIngresses (kinds/ingress/translate/host_reads.py): the mergeable and
canary Ingresses of a host, found without looking at every Ingress per host."""

from __future__ import annotations

from typing import Any

import pytest

from ferryman.engine.store import Store
from ferryman.kinds.ingress.translate.host_reads import CANARY, HostIngresses
from ferryman.resources.meta import ObjectRef

N = 300


def ingress(i: int, host: str, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": f"i{i}", "namespace": "default", "annotations": annotations},
        "spec": {
            "rules": [
                {
                    "host": host,
                    "http": {
                        "paths": [
                            {
                                "path": f"/p{i}",
                                "pathType": "Prefix",
                                "backend": {"service": {"name": "s", "port": {"number": 80}}},
                            }
                        ]
                    },
                }
            ]
        },
    }


class CountingStore(Store):
    """Counts the Ingress refs handed out and the objects read."""

    def __init__(self) -> None:
        super().__init__()
        self.looked_at = 0

    def refs(self, kind: str) -> list[ObjectRef]:
        out = super().refs(kind)
        self.looked_at += len(out)
        return out

    def get(self, kind: str, namespace: str, name: str) -> Any:
        self.looked_at += 1
        return super().get(kind, namespace, name)


class Host(str):
    """A host that counts how often it is compared (a str subclass's ``__eq__``
    goes first, whichever side it is on)."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        Host.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


MASTER = {"nginx.org/mergeable-ingress-type": "master"}
MINION = {"nginx.org/mergeable-ingress-type": "minion"}
CANARY_ON = {CANARY: "true"}


@pytest.mark.parametrize("kind", ["mergeable", "canaries"])
def test_each_host_costs_its_own_ingresses(kind: str) -> None:
    store = CountingStore()
    annotations = MINION if kind == "mergeable" else CANARY_ON
    for i in range(N):
        store.upsert(ingress(i, f"h{i}.test", annotations))
    found = HostIngresses(store)
    lookup = found.mergeable if kind == "mergeable" else found.canaries
    Host.compared = 0
    for i in range(N):
        assert [x.meta.name for x in lookup(Host(f"h{i}.test"))] == [f"i{i}"]
    # Each Ingress read once (and listed once), and compared with the hosts
    # looked up about once: not all of them per host.
    assert store.looked_at <= 3 * N
    assert Host.compared <= 2 * N


def test_changes_are_read_again_once_forgotten() -> None:
    store = Store()
    master = ingress(0, "a.test", MASTER)
    del master["spec"]["rules"][0]["http"]  # a master has no paths of its own
    store.upsert(master)
    store.upsert(ingress(1, "a.test", MINION))
    store.upsert(ingress(2, "a.test", CANARY_ON))
    found = HostIngresses(store)
    assert {x.meta.name for x in found.mergeable("a.test")} == {"i0", "i1"}
    assert [x.meta.name for x in found.canaries("a.test")] == ["i2"]
    # i1 moves to b.test; i2 stops being a canary; i3 is new; i0 is deleted.
    store.upsert(ingress(1, "b.test", MINION))
    store.upsert(ingress(2, "a.test", {}))
    store.upsert(ingress(3, "a.test", CANARY_ON))
    store.delete(ObjectRef("Ingress", "default", "i0"))
    for i in range(4):
        found.forget(ObjectRef("Ingress", "default", f"i{i}"))
    assert found.mergeable("a.test") == []
    assert [x.meta.name for x in found.mergeable("b.test")] == ["i1"]
    assert [x.meta.name for x in found.canaries("a.test")] == ["i3"]
