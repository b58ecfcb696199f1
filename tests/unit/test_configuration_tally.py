"""Configuration.count and .tally (engine/configuration.py): the resource gauges
set at every flush, kept as claimants come and go, not counted over all of them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ferryman.engine.configuration import Configuration
from ferryman.kinds.ingress.parse.ingress import Ingress, parse_ingress
from ferryman.resources.meta import ObjectRef

N = 500


def ingress(i: int, mergeable: str | None = None) -> Ingress:
    annotations = {"nginx.org/mergeable-ingress-type": mergeable} if mergeable else {}
    rule: dict[str, Any] = {"host": f"h{i}.test"}
    if mergeable != "master":  # a master has no paths of its own
        rule["http"] = {
            "paths": [
                {
                    "path": "/",
                    "pathType": "Prefix",
                    "backend": {"service": {"name": "s", "port": {"number": 80}}},
                }
            ]
        }
    return parse_ingress(
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": {"name": f"i{i}", "namespace": "default", "annotations": annotations},
            "spec": {"rules": [rule]},
        }
    )


class Iterations(dict[ObjectRef, Any]):
    """The claimants, counting the ones iterated over."""

    seen = 0

    def __iter__(self) -> Iterator[ObjectRef]:
        for ref in super().__iter__():
            Iterations.seen += 1
            yield ref


def test_counts_follow_upserts_and_deletes_without_a_scan() -> None:
    config = Configuration()
    config._ingresses = Iterations()  # white box: what count() would iterate over
    for i in range(N):
        config.upsert(ingress(i))
    config.upsert(ingress(0, "master"))  # i0 changes type
    config.upsert(ingress(1, "minion"))
    config.delete(ObjectRef("Ingress", "default", "i2"))
    config.delete(ObjectRef("Ingress", "default", "i2"))  # gone already
    Iterations.seen = 0
    for _ in range(N):
        assert config.count("Ingress") == N - 1
        assert config.tally("Ingress") == {"": N - 3, "master": 1, "minion": 1}
        assert config.count("VirtualServer") == 0
    assert Iterations.seen == 0
