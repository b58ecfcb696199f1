"""``ferryman render`` prints every route it would serve, and every Warning.

NIC users read ``nginx -T``; ferryman's routes are records, so render reads
them back into a table (stdout and routes.txt) and says each Warning Event
(stderr), run as a user runs it: the installed CLI, in its own process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from testkit.harness import ingress, path, rule, service

FERRYMAN = Path(sys.executable).parent / "ferryman"

SLICE = {
    "apiVersion": "discovery.k8s.io/v1",
    "kind": "EndpointSlice",
    "metadata": {"name": "tea-1", "namespace": "default",
                 "labels": {"kubernetes.io/service-name": "tea"}},
    "addressType": "IPv4",
    "ports": [{"port": 8080}],
    "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": True}}],
}  # fmt: skip
POLICIES = [
    {"apiVersion": "k8s.nginx.org/v1", "kind": "Policy",
     "metadata": {"name": name, "namespace": "default"}, "spec": spec}
    for name, spec in [
        ("allow", {"accessControl": {"allow": ["10.0.0.0/8"]}}),
        ("rate", {"rateLimit": {"rate": "10r/s", "key": "${binary_remote_addr}",
                                "zoneSize": "10M"}}),
    ]
]  # fmt: skip
VS = {
    "apiVersion": "k8s.nginx.org/v1",
    "kind": "VirtualServer",
    "metadata": {"name": "vs", "namespace": "default"},
    "spec": {
        "host": "vs.example.com",
        "policies": [{"name": "allow"}],
        "upstreams": [{"name": "tea", "service": "tea", "port": 80}],
        "routes": [
            {"path": "/tea", "policies": [{"name": "rate"}], "action": {"pass": "tea"}},
            {"path": "/old", "action": {"redirect": {"url": "https://vs.example.com/new",
                                                     "code": 301}}},
            {"path": "/shop", "route": "default/shop"},
        ],
    },
}  # fmt: skip
VSR = {
    "apiVersion": "k8s.nginx.org/v1",
    "kind": "VirtualServerRoute",
    "metadata": {"name": "shop", "namespace": "default"},
    "spec": {
        "host": "vs.example.com",
        "upstreams": [{"name": "coffee", "service": "coffee", "port": 80}],
        "subroutes": [{
            "path": "/shop/cart",
            "matches": [{"conditions": [{"cookie": "user_tier", "value": "beta"}],
                         "action": {"pass": "coffee"}}],
            "action": {"return": {"code": 200, "body": "hello world"}},
        }],
    },
}  # fmt: skip


def _render(tmp_path: Path, docs: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    manifests = tmp_path / "in"
    manifests.mkdir()
    (manifests / "all.yaml").write_text(yaml.safe_dump_all(docs))
    return subprocess.run(
        [str(FERRYMAN), "render", "--manifests", str(manifests), "--output", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def _cafe(annotations: dict[str, str]) -> dict[str, Any]:
    paths = [path("/tea", "tea"), path("/coffee", "coffee", "Exact")]
    return ingress("cafe", [rule("cafe.example.com", *paths)], annotations=annotations)


def test_render_prints_every_route_of_every_kind(tmp_path: Path) -> None:
    docs = [*service("tea"), *service("coffee"), SLICE, _cafe({}), *POLICIES, VS, VSR]
    result = _render(tmp_path, docs)
    assert result.returncode == 0, result.stderr
    header, *lines = result.stdout.splitlines()
    assert header.split() == ["OBJECT", "HOST", "PATH", "MATCH", "ACTION", "UPSTREAM",
                              "POLICIES", "TLS", "ENDPOINTS"]  # fmt: skip
    assert [line.split() for line in lines] == [
        ["Ingress/default/cafe", "cafe.example.com", "/coffee", "Exact", "proxy",
         "default/coffee:80", "-", "-", "(none:503)"],
        ["Ingress/default/cafe", "cafe.example.com", "/tea", "Prefix", "proxy",
         "default/tea:80", "-", "-", "10.0.0.1:8080"],
        ["VirtualServer/default/vs", "vs.example.com", "/tea", "Prefix", "proxy",
         "default/tea:80", "accessControl,rateLimit", "-", "10.0.0.1:8080"],
        ["VirtualServer/default/vs", "vs.example.com", "/old", "Prefix",
         "redirect:301:https://vs.example.com/new", "-", "accessControl", "-", "-"],
        # The VirtualServerRoute's subroute, served in its VirtualServer's host.
        ["VirtualServer/default/vs", "vs.example.com", "/shop/cart",
         "Prefix,cookie:user_tier=beta",
         "proxy", "default/coffee:80", "accessControl", "-", "(none:503)"],
        ["VirtualServer/default/vs", "vs.example.com", "/shop/cart", "Prefix", "return:200",
         "-", "accessControl", "-", "-"],
        ["VirtualServer/default/vs", "vs.example.com", "(unmatched)", "any", "404", "-",
         "accessControl", "-", "-"],
    ]  # fmt: skip
    # The same table, kept beside records.txt.
    assert (tmp_path / "out" / "routes.txt").read_text() == result.stdout


def test_render_says_every_warning_and_still_succeeds(tmp_path: Path) -> None:
    """A Warning is no failure (exit 0), but a NIC user must see what is not applied."""
    docs = [*service("tea"), *service("coffee"), _cafe({"nginx.org/ssl-ciphers": "HIGH"})]
    result = _render(tmp_path, docs)
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1, result.stderr
    assert warnings[0].startswith("warning: Ingress default/cafe: AddedOrUpdatedWithWarning: ")
    assert "nginx.org/ssl-ciphers: not implemented by ferryman" in warnings[0]
    # Served all the same.
    assert "cafe.example.com" in result.stdout


def test_render_with_nothing_to_serve_prints_no_table(tmp_path: Path) -> None:
    result = _render(tmp_path, [*service("tea")])
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert (tmp_path / "out" / "routes.txt").read_text() == ""
