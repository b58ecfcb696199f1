"""ferryman.sources.manifests: reading a manifests directory."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ferryman.resources.meta import ObjectRef
from ferryman.sources.manifests import ManifestsSource, parse_file

SERVICE = """\
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
spec:
  ports: [{name: http, port: 80}]
"""

INGRESS = """\
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
spec:
  defaultBackend: {service: {name: web, port: {number: 80}}}
"""


class Problems(list[tuple[str, str]]):
    def __call__(self, where: str, message: str) -> None:
        self.append((where, message))


def parse(path: Path, text: str) -> tuple[dict[ObjectRef, Mapping[str, Any]] | None, Problems]:
    path.write_text(text, encoding="utf-8")
    problems = Problems()
    return parse_file(path, problems), problems


def test_multi_document_file(tmp_path: Path) -> None:
    objs, problems = parse(tmp_path / "app.yaml", f"---\n{SERVICE}---\n---\n{INGRESS}")
    assert objs is not None
    assert set(objs) == {
        ObjectRef("Service", "shop", "web"),
        ObjectRef("Ingress", "default", "web"),
    }
    assert problems == []


def test_json_file(tmp_path: Path) -> None:
    doc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "api", "namespace": "shop"},
        "spec": {"ports": [{"port": 8080}]},
    }
    objs, problems = parse(tmp_path / "api.yaml", json.dumps(doc, indent=2))
    assert objs == {ObjectRef("Service", "shop", "api"): doc}
    assert problems == []


def test_kind_list(tmp_path: Path) -> None:
    items = [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"s{i}", "namespace": "n"}}
        for i in range(3)
    ]
    objs, _ = parse(
        tmp_path / "list.yaml", json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    )
    assert objs is not None
    assert sorted(r.name for r in objs) == ["s0", "s1", "s2"]


def test_namespaced_objects_default_to_the_default_namespace(tmp_path: Path) -> None:
    text = (
        INGRESS
        + "---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\n"
        + "metadata: {name: ferryman}\nspec: {controller: ferryman.io/ingress-controller}\n"
    )
    objs, _ = parse(tmp_path / "a.yaml", text)
    assert objs is not None
    ing = objs[ObjectRef("Ingress", "default", "web")]
    assert ing["metadata"]["namespace"] == "default"
    # Cluster-scoped objects get no namespace.
    cls = objs[ObjectRef("IngressClass", "", "ferryman")]
    assert "namespace" not in cls["metadata"]


def test_unknown_kinds_are_ignored_silently(tmp_path: Path) -> None:
    text = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n---\n"
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\n---\n" + SERVICE
    )
    objs, problems = parse(tmp_path / "a.yaml", text)
    assert objs is not None
    assert list(objs) == [ObjectRef("Service", "shop", "web")]
    assert problems == []


def test_yaml_syntax_error_is_reported_with_the_file_name(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    objs, problems = parse(path, SERVICE + "  bad: [unclosed\n")
    assert objs is None
    ((where, message),) = problems
    assert where == str(path)
    assert "invalid YAML" in message
    assert "line" in message
    assert "\n" not in message


def test_duplicate_objects_in_one_file_are_reported_and_the_first_is_used(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    objs, problems = parse(path, SERVICE + "---\n" + SERVICE.replace("port: 80", "port: 81"))
    assert objs is not None
    (svc,) = objs.values()
    assert svc["spec"]["ports"][0]["port"] == 80
    ((where, message),) = problems
    assert str(path) in where
    assert "document 2" in where
    assert "Service shop/web" in message
    assert "twice" in message


def test_same_name_in_different_namespaces_is_not_a_duplicate(tmp_path: Path) -> None:
    objs, problems = parse(tmp_path / "a.yaml", SERVICE + "---\n" + SERVICE.replace("shop", "b"))
    assert objs is not None
    assert len(objs) == 2
    assert problems == []


def test_malformed_documents_are_reported(tmp_path: Path) -> None:
    text = "- just\n- a list\n---\nkind: Service\nmetadata: {name: x}\n---\n" + (
        "apiVersion: v1\nkind: Service\nmetadata: {namespace: x}\n"
    )
    objs, problems = parse(tmp_path / "bad.yaml", text)
    assert objs == {}
    messages = [m for _, m in problems]
    assert len(messages) == 3
    assert "mapping" in messages[0]
    assert "apiVersion and kind" in messages[1]
    assert "metadata.name" in messages[2]


def test_empty_file(tmp_path: Path) -> None:
    assert parse(tmp_path / "empty.yaml", "") == ({}, [])


def test_unreadable_file_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"kind: \xff\n")
    problems = Problems()
    assert parse_file(path, problems) is None
    assert problems[0][0] == str(path)


class RecordingSink:
    def __init__(self) -> None:
        self.objects: dict[ObjectRef, Mapping[str, Any]] = {}

    def upsert(self, obj: Mapping[str, Any]) -> None:
        md = obj["metadata"]
        self.objects[ObjectRef(obj["kind"], md.get("namespace", ""), md["name"])] = obj

    def delete(self, ref: ObjectRef) -> None:
        del self.objects[ref]


def test_directory_load_first_file_wins_and_only_yaml_files_count(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(SERVICE)
    (tmp_path / "b.yml").write_text(SERVICE.replace("port: 80", "port: 81") + "---\n" + INGRESS)
    (tmp_path / "c.txt").write_text(SERVICE.replace("web", "ignored"))
    (tmp_path / ".hidden.yaml").write_text(SERVICE.replace("web", "hidden"))
    sink, problems = RecordingSink(), Problems()
    ManifestsSource(tmp_path, sink, problems).load()
    assert set(sink.objects) == {
        ObjectRef("Service", "shop", "web"),
        ObjectRef("Ingress", "default", "web"),
    }
    assert sink.objects[ObjectRef("Service", "shop", "web")]["spec"]["ports"][0]["port"] == 80
    ((where, message),) = problems
    assert where == str(tmp_path / "b.yml")
    assert "already defined" in message
