"""Manifests mode: every ``*.yaml``/``*.yml`` file of one directory, watched.

Files may hold several documents; JSON is YAML. A file that fails to parse
keeps its previous objects (a half-written edit must not take routes down) and
is reported with the parser's line and column. When two files define the same
object, the file whose name sorts first wins and the other is reported.
Namespaced objects without a namespace land in "default", as with kubectl.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import watchfiles
import yaml

from ferryman.resources.meta import ObjectRef, ref_of
from ferryman.sources import CLUSTER_SCOPED, KINDS, Sink

log = logging.getLogger("ferryman.manifests")

Objects = dict[ObjectRef, Mapping[str, Any]]
ProblemHandler = Callable[[str, str], None]  # (file, message)

# libyaml's loader is ~10x faster on 10,000 manifests; PyPI wheels ship it.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _is_manifest(path: Path) -> bool:
    return path.suffix in (".yaml", ".yml") and not path.name.startswith(".")


def parse_file(path: Path, on_problem: ProblemHandler) -> Objects | None:
    """The objects in one file, or None when the file cannot be parsed at all."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        on_problem(str(path), f"cannot read: {e}")
        return None
    try:
        docs = list(yaml.load_all(text, Loader=_Loader))
    except yaml.YAMLError as e:
        on_problem(str(path), f"invalid YAML: {' '.join(str(e).split())}")
        return None
    objects: Objects = {}
    for i, doc in enumerate(docs):
        if doc is None:
            continue
        for obj in _items(doc):
            _add(objects, obj, f"{path} (document {i + 1})", on_problem)
    return objects


def _items(doc: object) -> list[object]:
    if isinstance(doc, Mapping) and doc.get("kind") == "List":
        items = doc.get("items")
        return list(items) if isinstance(items, list) else []
    return [doc]


def _add(objects: Objects, obj: object, where: str, on_problem: ProblemHandler) -> None:
    if not isinstance(obj, Mapping):
        on_problem(where, "not an object: a manifest must be a YAML mapping")
        return
    kind = obj.get("kind")
    if not isinstance(kind, str) or not isinstance(obj.get("apiVersion"), str):
        on_problem(where, "apiVersion and kind are required")
        return
    if kind not in KINDS:
        log.info("ignoring unsupported kind", extra={"fields": {"file": where, "kind": kind}})
        return
    md = obj.get("metadata")
    if not isinstance(md, Mapping) or not isinstance(md.get("name"), str) or not md["name"]:
        on_problem(where, f"{kind}: metadata.name is required")
        return
    if kind not in CLUSTER_SCOPED and not md.get("namespace"):
        obj = {**obj, "metadata": {**md, "namespace": "default"}}
    ref = ref_of(obj)
    assert ref is not None
    if ref in objects:
        on_problem(where, f"{ref} is defined twice in this file; the first one is used")
        return
    objects[ref] = obj


class ManifestsSource:
    def __init__(self, directory: Path, sink: Sink, on_problem: ProblemHandler) -> None:
        self._dir = directory
        self._sink = sink
        self._on_problem = on_problem
        self._files: dict[Path, Objects] = {}
        self._merged: Objects = {}

    def load(self) -> None:
        """Read the whole directory and deliver it; called once before ``run``."""
        paths = sorted(p for p in self._dir.iterdir() if p.is_file() and _is_manifest(p))
        self._reload(set(paths))

    def _reload(self, changed: set[Path]) -> None:
        for path in changed:
            if path.is_file():
                parsed = parse_file(path, self._on_problem)
                if parsed is not None:
                    self._files[path] = parsed
            else:
                self._files.pop(path, None)
        merged: Objects = {}
        for path in sorted(self._files):
            for ref, obj in self._files[path].items():
                if ref in merged:
                    if path in changed:
                        self._on_problem(str(path), f"{ref} is already defined in another file")
                    continue
                merged[ref] = obj
        for ref in self._merged.keys() - merged.keys():
            self._sink.delete(ref)
        for ref, obj in merged.items():
            old = self._merged.get(ref)
            if old is not obj and old != obj:
                self._sink.upsert(obj)
        self._merged = merged

    async def run(self, stop: asyncio.Event) -> None:
        # step: wait this long for a burst of writes to end; debounce: but
        # never hold changes longer than this, so edits apply within a second.
        async for changes in watchfiles.awatch(
            self._dir, stop_event=stop, debounce=400, step=50, recursive=False
        ):
            paths = {Path(p) for _, p in changes}
            relevant = {p for p in paths if _is_manifest(p)}
            if relevant:
                self._reload(relevant)
