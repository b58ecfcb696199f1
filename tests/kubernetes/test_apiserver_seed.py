"""tools/testapiserver --seed (bench.seeding): objects written into etcd before
the API server starts are served exactly as the same objects created through
the API, each with a resourceVersion of its own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.processes import ingress_docs
from bench.seeding import PROBE, seeded_server
from lightkube import codecs
from lightkube.resources.core_v1 import Service
from lightkube.resources.discovery_v1 import EndpointSlice
from lightkube.resources.networking_v1 import Ingress

# Set per object by the server whichever way it was stored.
PER_OBJECT = ("uid", "creationTimestamp", "resourceVersion")


def docs(i: int) -> list[dict[str, Any]]:
    ingress, service, slice_ = ingress_docs(i, (8080,))
    service["spec"]["clusterIP"] = "None"
    slice_["endpoints"] = [{"addresses": ["10.232.0.2"], "conditions": {"ready": True}}]
    return [ingress, service, slice_]


def comparable(obj: Any, name: str) -> str:
    d = obj.to_dict()
    for k in PER_OBJECT:
        d["metadata"].pop(k)
    for entry in d["metadata"]["managedFields"]:
        entry.pop("time")
    return json.dumps(d, sort_keys=True).replace(name, "NAME")


def test_seeded_objects_are_served_as_created_ones(apiserver_binary: Path, tmp_path: Path) -> None:
    probe = json.loads(json.dumps(docs(999)).replace("app999", PROBE))
    server = seeded_server(apiserver_binary, tmp_path, probe, docs(0) + docs(1))
    try:
        client = server.client()
        for doc in docs(2):
            client.create(codecs.from_dict(doc))
        versions = set()
        for kind, suffix in ((Ingress, ""), (Service, ""), (EndpointSlice, "-0")):
            created = client.get(kind, f"app2{suffix}", namespace="default")
            for i in (0, 1):
                seeded = client.get(kind, f"app{i}{suffix}", namespace="default")
                assert comparable(seeded, f"app{i}") == comparable(created, "app2")
                versions.add(seeded.metadata.resourceVersion)
            names = {o.metadata.name for o in client.list(kind, namespace="default")}
            assert {f"app{i}{suffix}" for i in range(3)} <= names
            assert f"{PROBE}{suffix}" not in names
        assert len(versions) == 6
    finally:
        server.stop()
