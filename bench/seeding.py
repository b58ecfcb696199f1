"""Populating tools/testapiserver fast: the objects are written into its etcd
before it starts (``testapiserver --seed``), not created one by one.

Through the API each create costs the server ~5 ms of CPU, ~160 objects per
second on 2 cores: 300,000 objects (100,000 Ingresses) would take half an
hour. The seed path stores each object as a create would (defaulted,
validated by its kind's strategy, protobuf at the storage version, see
tools/testapiserver/seed.go); what the API's REST layer adds on top (a
Service's IP families, every object's managedFields) is read here from one
object of each kind created through the API first, and copied into the rest.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from testkit.apiserver import APIServer

PROBE = "seed-probe"
# What the Service REST layer (not its strategy) sets on a create: the IP
# allocation's results, which for a headless Service are these fields.
SERVICE_REST_FIELDS = ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy")


def rest_additions(server: APIServer, probe: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Creates ``probe`` through the API, reads back what the REST layer added
    per kind, and deletes the probe again."""
    from lightkube import codecs

    client = server.client()
    added: dict[str, dict[str, Any]] = {}
    for doc in probe:
        obj = codecs.from_dict(doc)
        client.create(obj)
        stored = client.get(type(obj), doc["metadata"]["name"], namespace="default").to_dict()
        extra: dict[str, Any] = {"managedFields": stored["metadata"]["managedFields"]}
        if doc["kind"] == "Service":
            extra["spec"] = {
                k: stored["spec"][k] for k in SERVICE_REST_FIELDS if k in stored["spec"]
            }
        added[doc["kind"]] = extra
        client.delete(type(obj), doc["metadata"]["name"], namespace="default")
    return added


def write_seed(path: Path, docs: list[dict[str, Any]], added: dict[str, dict[str, Any]]) -> None:
    """One JSON object per line, each with its kind's REST additions."""
    with path.open("w") as f:
        for doc in docs:
            extra = added[doc["kind"]]
            out = {**doc, "metadata": {**doc["metadata"], "managedFields": extra["managedFields"]}}
            if "spec" in extra:
                out["spec"] = {**doc["spec"], **extra["spec"]}
            f.write(json.dumps(out, separators=(",", ":")))
            f.write("\n")


def seeded_server(
    binary: Path, workdir: Path, probe: list[dict[str, Any]], docs: list[dict[str, Any]]
) -> APIServer:
    """A running API server holding ``docs``: started once to learn the REST
    layer's additions from ``probe`` (named ``PROBE``), then restarted seeded."""
    first = APIServer(binary, workdir)
    first.start()
    try:
        added = rest_additions(first, probe)
    finally:
        first.stop()
    path = workdir / "seed.jsonl"
    write_seed(path, docs, added)
    server = APIServer(binary, workdir, "--seed", str(path))
    server.start()
    path.unlink()
    return server


def seed_seconds(server: APIServer) -> float | None:
    """How long the etcd writes took, as the server logged it (a Go duration:
    "seeded N objects in 411ms", "... in 1m40.2s")."""
    for line in reversed((server.dir / "apiserver.log").read_text().splitlines()):
        if m := re.search(r"seeded \d+ objects in (?:(\d+)m)?([\d.]+)(ms|s)$", line):
            minutes, amount, unit = m.groups()
            seconds = float(amount) / (1000 if unit == "ms" else 1)
            return round(int(minutes or 0) * 60 + seconds, 1)
    return None
