"""``ferryman migrate --kubeconfig``: the cluster's Ingresses, read with the
project's client, reported as from a directory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml
from lightkube import Client, codecs

from testkit.apiserver import APIServer

DATA = Path(__file__).parent.parent / "data" / "ingress-nginx"
FERRYMAN = Path(sys.executable).parent / "ferryman"


def test_the_cluster_s_ingresses_are_reported(
    apiserver: APIServer, kube: Client, namespace: str
) -> None:
    for name in ("05-whitelist.yaml", "06-snippets.yaml"):
        for doc in yaml.safe_load_all((DATA / name).read_text()):
            doc["metadata"]["namespace"] = namespace
            kube.create(codecs.from_dict(doc))
    result = subprocess.run(
        [
            str(FERRYMAN),
            "migrate",
            "--kubeconfig",
            apiserver.kubeconfig,
            "--namespace",
            namespace,
            "--output",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    out = json.loads(result.stdout)
    verdicts = {i["name"]: i["verdict"] for i in out["ingresses"]}
    assert verdicts == {"internal": "served", "legacy": "rejected"}
    assert {i["source"] for i in out["ingresses"]} == {"cluster"}
