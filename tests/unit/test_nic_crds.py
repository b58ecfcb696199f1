"""The committed CRDs are what nic_crds generates, and the parsers read exactly the CRDs' fields."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from ferryman import kinds
from ferryman.kinds.policy.parse.policy import parse_policy
from ferryman.kinds.virtualserver.parse.virtualserver import parse_virtual_server
from ferryman.kinds.virtualserver.parse.virtualserverroute import parse_virtual_server_route
from ferryman.resources.nic_fields import Context, Parsed
from testkit.nic_fixtures import (
    POLICIES,
    ROOT,
    VIRTUAL_SERVER,
    VIRTUAL_SERVER_ROUTE,
    nic_examples,
)

Parser = Callable[..., Parsed[Any]]
PARSERS: dict[str, Parser] = {
    "VirtualServer": parse_virtual_server,
    "VirtualServerRoute": parse_virtual_server_route,
    "Policy": parse_policy,
}
FIXTURES = {
    "VirtualServer": [VIRTUAL_SERVER],
    "VirtualServerRoute": [VIRTUAL_SERVER_ROUTE],
    "Policy": POLICIES,
}


@pytest.mark.parametrize("directory", ["deploy/crds", "charts/ferryman/crds"])
def test_the_committed_crds_are_the_generated_ones(directory: str) -> None:
    for name, text in kinds.crd_files().items():
        committed = ROOT / directory / name
        assert committed.read_text() == text, f"{committed} is stale: run scripts/nic-crds.py"


def test_the_script_writes_both_copies(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "nic-crds.py", tmp_path / "scripts")
    run = subprocess.run(
        [sys.executable, str(tmp_path / "scripts" / "nic-crds.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    for directory in ("deploy/crds", "charts/ferryman/crds"):
        for name, text in kinds.crd_files().items():
            assert (tmp_path / directory / name).read_text() == text


def test_the_crds_have_nics_names_short_names_and_columns() -> None:
    by_kind = {k: kinds.crd(k) for k in PARSERS}
    assert {k: c["metadata"]["name"] for k, c in by_kind.items()} == {
        "VirtualServer": "virtualservers.k8s.nginx.org",
        "VirtualServerRoute": "virtualserverroutes.k8s.nginx.org",
        "Policy": "policies.k8s.nginx.org",
    }
    assert [c["spec"]["names"]["shortNames"] for c in by_kind.values()] == [
        ["vs"],
        ["vsr"],
        ["pol"],
    ]
    for kind, c in by_kind.items():
        version = c["spec"]["versions"][0]
        assert version["subresources"] == {"status": {}}
        columns = [col["name"] for col in version["additionalPrinterColumns"]]
        assert columns[0] == "State" and columns[-1] == "Age"
        assert ("Host" in columns) == (kind != "Policy")


def _object_nodes(schema: Mapping[str, Any], path: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every object schema with declared properties, by the parsers' path form."""
    if schema.get("type") == "array":
        yield from _object_nodes(schema["items"], path + "[]")
    if "properties" in schema:
        yield path, schema
        for key, sub in schema["properties"].items():
            yield from _object_nodes(sub, f"{path}.{key}")


def _read(kind: str) -> dict[str, set[str]]:
    """Which keys the parser read where, over the rich fixtures and NIC's examples."""
    read: dict[str, set[str]] = {}
    objects = FIXTURES[kind] + [doc for _, doc in nic_examples() if doc["kind"] == kind]
    for obj in objects:
        ctx = Context()
        PARSERS[kind](obj, ctx)
        for path, keys in ctx.read.items():
            read.setdefault(path, set()).update(keys)
    return read


def _spec_nodes(kind: str) -> dict[str, Mapping[str, Any]]:
    schema = kinds.crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return dict(_object_nodes(schema["properties"]["spec"], "spec"))


def test_the_parsers_read_exactly_the_fields_of_the_crds() -> None:
    """Both ways: a CRD field no parser reads would be silently ignored; a field a parser
    reads that the CRD lacks would be pruned by the API server before ferryman sees it."""
    visited: set[int] = set()
    for kind in PARSERS:
        nodes = _spec_nodes(kind)
        for path, keys in _read(kind).items():
            assert path in nodes, f"{kind}: the parser reads {path}, which the CRD lacks"
            assert keys == set(nodes[path]["properties"]), f"{kind}: {path}"
            visited.add(id(nodes[path]))
    # Each sub-schema (one may sit at several paths, as an action does, and in two kinds,
    # as routes do) is read somewhere.
    for kind in PARSERS:
        unread = [p for p, node in _spec_nodes(kind).items() if id(node) not in visited]
        assert not unread, f"{kind}: no fixture makes the parser read {unread}"


def test_the_generated_files_are_plain_yaml_without_aliases() -> None:
    for text in kinds.crd_files().values():
        assert "&id" not in text
        assert yaml.safe_load(text)["kind"] == "CustomResourceDefinition"
