"""A VirtualServer route's ``routeSelector.matchExpressions``: NIC builds the
selector from ``matchLabels`` alone, so its expressions select nothing more or
less. ferryman refused the VirtualServer; now it serves it as NIC does, with a
Warning naming the field, seen through ``ferryman render`` as a user sees it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from testkit.harness import service

FERRYMAN = Path(sys.executable).parent / "ferryman"


def _vsr(name: str, tier: str, path: str) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServerRoute",
        "metadata": {"name": name, "namespace": "default",
                     "labels": {"app": "shop", "tier": tier}},
        "spec": {
            "host": "shop.example.com",
            "upstreams": [{"name": "web", "service": "web", "port": 80}],
            "subroutes": [{"path": path, "action": {"pass": "web"}}],
        },
    }  # fmt: skip


VS = {
    "apiVersion": "k8s.nginx.org/v1",
    "kind": "VirtualServer",
    "metadata": {"name": "shop", "namespace": "default"},
    "spec": {
        "host": "shop.example.com",
        "routes": [{
            "path": "/shop",
            "routeSelector": {
                "matchLabels": {"app": "shop"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold"]}],
            },
        }],
    },
}  # fmt: skip


def test_match_expressions_are_ignored_as_nic_ignores_them(tmp_path: Path) -> None:
    manifests = tmp_path / "in"
    manifests.mkdir()
    docs = [*service("web"), VS, _vsr("gold", "gold", "/shop/gold"),
            _vsr("silver", "silver", "/shop/silver")]  # fmt: skip
    (manifests / "all.yaml").write_text(yaml.safe_dump_all(docs))
    result = subprocess.run(
        [str(FERRYMAN), "render", "--manifests", str(manifests), "--output", str(tmp_path / "o")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    # Selected by matchLabels alone: the silver tier too, as in NIC.
    paths = [line.split()[2] for line in result.stdout.splitlines()[1:]]
    assert paths == ["/shop/gold", "/shop/silver"]
    (warning,) = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert warning.startswith("warning: VirtualServer default/shop: AddedOrUpdatedWithWarning: ")
    assert warning.endswith(
        "spec.routes[0].routeSelector.matchExpressions: ignored, as NIC ignores it: "
        "VirtualServerRoutes are selected by matchLabels"
    )
