"""The controller's memory: what it imports before it needs it, and what the
store keeps per object (issue 17; bench/memory.py measures the whole process)."""

from __future__ import annotations

import copy
import gc
import json
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

from ferryman.engine.store import Store

# An EndpointSlice as the API server returns it to a client that asked for JSON.
API_SLICE: dict[str, Any] = {
    "apiVersion": "discovery.k8s.io/v1",
    "kind": "EndpointSlice",
    "metadata": {
        "name": "web-abcde",
        "generateName": "web-",
        "namespace": "shop",
        "uid": "0f9c1c1e-5f55-4c1b-9d0e-2b7f6f1c9a11",
        "resourceVersion": "123456",
        "generation": 3,
        "creationTimestamp": "2024-01-02T03:04:05Z",
        "labels": {
            "kubernetes.io/service-name": "web",
            "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
            "app": "web",
        },
        "annotations": {"endpoints.kubernetes.io/last-change-trigger-time": "2024-01-02T03:04:05Z"},
        "ownerReferences": [
            {"apiVersion": "v1", "kind": "Service", "name": "web", "uid": "u", "controller": True}
        ],
        "managedFields": [
            {
                "manager": "kube-controller-manager",
                "operation": "Update",
                "apiVersion": "discovery.k8s.io/v1",
                "time": "2024-01-02T03:04:05Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:addressType": {}, "f:endpoints": {}, "f:ports": {}},
            }
        ],
    },
    "addressType": "IPv4",
    "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
    "endpoints": [
        {
            "addresses": [f"10.0.0.{i}"],
            "conditions": {"ready": True, "serving": True, "terminating": False},
            "nodeName": "node-1",
            "zone": "a",
            "targetRef": {"kind": "Pod", "namespace": "shop", "name": f"web-{i}", "uid": "u"},
        }
        for i in (1, 2)
    ],
}


def _bytes_per_slice(store: Store, batch: int, count: int) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(count):  # each as a source hands it over, then lets it go
            s = copy.deepcopy(API_SLICE)
            s["metadata"]["name"] = f"web-{batch}-{i}"
            store.upsert(s)
        del s
        gc.collect()
        return (tracemalloc.get_traced_memory()[0] - before) / count
    finally:
        tracemalloc.stop()


def test_the_store_keeps_an_api_object_in_under_a_kilobyte() -> None:
    store = Store()
    # The least of three batches: a batch that happens to grow the interpreter's
    # table of interned strings (its size depends on the tests run before) is
    # charged for the whole table once.
    per_object = min(_bytes_per_slice(store, batch, 1000) for batch in range(3))
    # The parsed shape of this slice is ~3.5 KB as dicts; what is kept is ~300
    # bytes packed, plus the store's index entries (~870 in all here, of which
    # ~64 are the two endpoints' pod names).
    assert per_object < 1200, per_object
    assert store.slices_for("shop", "web")[0]["endpoints"][0] == {
        "addresses": ["10.0.0.1"],
        "conditions": {"ready": True, "serving": True, "terminating": False},
        "nodeName": "node-1",
        # Of targetRef, the pod's name only (the latency histogram's pod_name).
        "targetRef": {"kind": "Pod", "name": "web-1"},
    }


def test_what_only_some_controllers_need_is_not_imported_up_front() -> None:
    """cryptography (~9 MB resident) is needed only once a TLS Secret is checked,
    watchfiles only in manifests mode, lightkube only in Kubernetes mode; each stays mapped
    once imported, and importing them took ~0.1 s of every start (issue 17). The
    entry point's modules, every subcommand's parser built: the machine
    controller's command once imported lightkube for all of them (~60 ms)."""
    lazy = (
        "cryptography",
        "watchfiles",
        "lightkube",
        # Issue 31: PyYAML is manifests mode's (and migrate's, render's, the
        # CRD files'), shtab the completion command's (it reads its version
        # through importlib.metadata), the migrate report's parsers migrate's.
        "yaml",
        "shtab",
        # aiohttp (~130 ms, two TLS contexts made at import) serves the TLS
        # webhooks alone: NGINX's sockets and the probes are h11's.
        "aiohttp",
        "ferryman.app.migrate",
        "ferryman.app.render",
    )
    code = (
        "import sys, ferryman.app.launch, ferryman.app.cli; ferryman.app.cli.parser(); "
        "import ferryman.app.root; "
        f"print(sorted(set({lazy}) & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


_GATEWAY_MODULES = (
    "import json, sys; from testkit.controller_kit import Kit; {kit}; "
    "print(json.dumps(sorted(m for m in sys.modules if m.startswith('ferryman.kinds.gateway.')"
    " and not m.startswith('ferryman.kinds.gateway.parse'))))"
)


def test_gateway_api_is_imported_only_when_enabled(tmp_path: Path) -> None:
    """Gateway API's translator and records (~90 dataclasses, ~50 ms of every
    start; issue 31) are imported by a worker serving them, not by one that
    does not: its spec alone is (the registry), and the key it reads."""
    root = Path(__file__).resolve().parents[2]

    def imported(kit: str) -> list[str]:
        code = _GATEWAY_MODULES.format(kit=kit)
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
        )
        names: list[str] = json.loads(out.stdout)
        return names

    assert imported(f"Kit({str(tmp_path)!r})") == ["ferryman.kinds.gateway.spec"]
    enabled = (
        "from ferryman.engine.settings import GatewaySettings; "
        f"Kit({str(tmp_path)!r}, gateway=GatewaySettings(enabled=True))"
    )
    assert "ferryman.kinds.gateway.translate.gateway" in imported(enabled)
