"""Manifests mode: every ``*.yaml``/``*.yml`` file of one directory, watched.

Files may hold several documents; JSON is YAML. A file that fails to parse
keeps its previous objects (a half-written edit must not take routes down) and
is reported with the parser's line and column. When two files define the same
object, the file whose name sorts first wins and the other is reported.
Namespaced objects without a namespace land in "default", as with kubectl.

A file is measured before anything is built from it: its size here, how deep
its collections nest and how many nodes its aliases stand for in
``manifest_yaml.py``. A file over a limit, or with an alias loop, is reported
and keeps its previous objects.
"""

from __future__ import annotations

import asyncio
import logging
import marshal
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from ferryman.engine.kind_spec import KindSpec
from ferryman.resources.meta import ObjectRef, ref_of
from ferryman.resources.raw import Packed, pack
from ferryman.sources import Kinds, Sink, forked, manifest_kinds
from ferryman.sources.manifest_yaml import Refused, load_all

log = logging.getLogger("ferryman.manifests")

Objects = dict[ObjectRef, Mapping[str, Any]]
ProblemHandler = Callable[[str, str], None]  # (file, message)
Problem = tuple[str, str]  # (file, message)
# The first load splits its files with a forked child from this many on: the
# fork and the results' way back cost about what parsing 50 files does (measured:
# 100 files took ~30 ms either way).
SPLIT_MIN_FILES = 200
# How long the parsing child may take beyond when ours ended: this factor of our
# half's time, and never less than the minimum (a busy machine shares cores).
CHILD_WAIT_FACTOR = 3.0
CHILD_WAIT_MIN = 5.0

# The API server takes request bodies up to 3 MiB and etcd stores objects up to
# 1.5 MiB; 16 MiB holds ten thousand ordinary Ingresses in one file, and keeps
# the memory one file can take (a few hundred MB once built) bounded.
MAX_FILE_BYTES = 16 * 1024 * 1024


def _is_manifest(path: Path) -> bool:
    return path.suffix in (".yaml", ".yml") and not path.name.startswith(".")


def parse_file(path: Path, on_problem: ProblemHandler, kinds: Kinds) -> Objects | None:
    """The objects of ``kinds`` in one file, or None when the file cannot be
    parsed at all."""
    try:
        with path.open("rb") as f:
            # read(n) allocates n bytes up front: ask for what the file holds,
            # and for the rest, bounded, only if it grew meanwhile.
            size = min(os.fstat(f.fileno()).st_size, MAX_FILE_BYTES)
            data = f.read(size + 1)
            if len(data) > size:
                data += f.read(MAX_FILE_BYTES + 1 - len(data))
        if len(data) > MAX_FILE_BYTES:
            on_problem(str(path), f"file is larger than {MAX_FILE_BYTES} bytes: not read")
            return None
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        on_problem(str(path), f"cannot read: {e}")
        return None
    try:
        docs = load_all(text)
    except Refused as e:
        on_problem(str(path), f"not read: {e}")
        return None
    except yaml.YAMLError as e:
        on_problem(str(path), f"invalid YAML: {' '.join(str(e).split())}")
        return None
    objects: Objects = {}
    for i, doc in enumerate(docs):
        if doc is None:
            continue
        for obj in _items(doc):
            _add(objects, obj, f"{path} (document {i + 1})", on_problem, kinds)
    return objects


def _items(doc: object) -> list[object]:
    if isinstance(doc, Mapping) and doc.get("kind") == "List":
        items = doc.get("items")
        return list(items) if isinstance(items, list) else []
    return [doc]


def _add(
    objects: Objects, obj: object, where: str, on_problem: ProblemHandler, kinds: Kinds
) -> None:
    if not isinstance(obj, Mapping):
        on_problem(where, "not an object: a manifest must be a YAML mapping")
        return
    kind = obj.get("kind")
    if not isinstance(kind, str) or not isinstance(obj.get("apiVersion"), str):
        on_problem(where, "apiVersion and kind are required")
        return
    if (spec := kinds.get(kind)) is None:
        log.info("ignoring unsupported kind", extra={"fields": {"file": where, "kind": kind}})
        return
    md = obj.get("metadata")
    if not isinstance(md, Mapping) or not isinstance(md.get("name"), str) or not md["name"]:
        on_problem(where, f"{kind}: metadata.name is required")
        return
    if spec.namespaced and not md.get("namespace"):
        obj = {**obj, "metadata": {**md, "namespace": "default"}}
    elif not spec.namespaced and md.get("namespace"):
        # kubectl ignores it; kept, the object would be looked for in vain.
        obj = {**obj, "metadata": {k: v for k, v in md.items() if k != "namespace"}}
    ref = ref_of(obj)
    assert ref is not None
    if ref in objects:
        on_problem(where, f"{ref} is defined twice in this file; the first one is used")
        return
    objects[ref] = obj


def _parse_files(
    paths: Iterable[Path], kinds: Kinds
) -> tuple[dict[Path, Objects | None], list[Problem]]:
    """Each file's objects, slim and packed as the store keeps them (they
    are held by the source too), None for a file gone or that cannot be read;
    and the problems found, in order."""
    problems: list[Problem] = []
    parsed: dict[Path, Objects | None] = {}
    for path in paths:
        on_problem: ProblemHandler = lambda w, m: problems.append((w, m))  # noqa: E731
        objects = parse_file(path, on_problem, kinds) if path.is_file() else None
        if objects is not None:  # the loader built them compact
            parsed[path] = {r: pack(o, compacted=True, kinds=kinds) for r, o in objects.items()}
        else:
            parsed[path] = None
    return parsed, problems


def _encode(parsed: Mapping[Path, Objects | None], problems: list[Problem]) -> bytes:
    """``_parse_files``'s result as a forked child sends it: a marshal string of
    the problems and, per file, each object's ref and packed data."""
    files: list[tuple[str, list[tuple[str, str, str, bytes]] | None]] = []
    for path, objects in parsed.items():
        if objects is None:
            files.append((str(path), None))
            continue
        items = []
        for ref, obj in objects.items():
            data = obj.data if isinstance(obj, Packed) else None
            if data is None:
                raise ValueError(f"{ref} cannot be sent")  # the parent parses the file
            items.append((ref.kind, ref.namespace, ref.name, data))
        files.append((str(path), items))
    return marshal.dumps((problems, files))


def _decode(data: bytes, on_problem: ProblemHandler) -> dict[Path, Objects | None]:
    problems, files = marshal.loads(data)
    for where, message in problems:
        on_problem(where, message)
    return {
        Path(path): None
        if items is None
        else {
            ObjectRef(sys.intern(kind), sys.intern(ns), name): Packed.of(packed)
            for kind, ns, name, packed in items
        }
        for path, items in files
    }


class ManifestsSource:
    def __init__(
        self,
        directory: Path,
        sink: Sink,
        on_problem: ProblemHandler,
        kinds: Iterable[KindSpec],
    ) -> None:
        """``kinds``: the registered kinds, accepted besides the engine's own."""
        self._kinds = manifest_kinds(kinds)
        self._dir = directory
        self._sink = sink
        self._on_problem = on_problem
        self._files: dict[Path, Objects] = {}
        self._merged: Objects = {}

    def load(self) -> None:
        """Read the whole directory and deliver it; called once before ``run``."""
        changed = self._manifests()
        self._deliver(changed, self._parse(changed))

    async def load_in_thread(self) -> None:
        """``load``, with the files parsed in a thread: the event loop goes on
        meanwhile (with NGINX's start, a child it waits for). The objects are
        delivered on the loop's thread, as every change is.

        With ``SPLIT_MIN_FILES`` files or more and two CPUs, a forked child
        parses every other file meanwhile (``forked``; 10,000 Ingresses: 2.5 s
        of CPU, half of it then on the other core). A pool whose workers
        started afresh (forkserver or spawn) took longer than one process on
        two busy cores: they import PyYAML and ferryman anew.
        """
        changed = self._manifests()
        ours, theirs = sorted(changed), []
        child = None
        if len(ours) >= SPLIT_MIN_FILES and len(os.sched_getaffinity(0)) >= 2:
            ours, theirs = ours[::2], ours[1::2]
            child = forked.fork(lambda: _encode(*_parse_files(theirs, self._kinds)))
            if child is None:
                ours, theirs = sorted(changed), []
        started = time.monotonic()
        try:
            parsed = await asyncio.to_thread(self._parse, set(ours))
        except BaseException:
            if child is not None:
                child.kill()
                child.result()  # reaped: it is ending
            raise
        if child is not None:
            # Its half takes about as long as ours: one far later is stuck (it
            # would hold readiness back for ever), so it is ended and its files
            # are parsed here.
            late = max(CHILD_WAIT_MIN, CHILD_WAIT_FACTOR * (time.monotonic() - started))
            waiting = asyncio.ensure_future(asyncio.to_thread(child.result))
            try:
                if not (await asyncio.wait({waiting}, timeout=late))[0]:
                    log.warning(
                        "the second parsing process is late; ended",
                        extra={"fields": {"waited_s": round(late, 2)}},
                    )
                    child.kill()  # its pipe closes: the thread reaps it and returns
                data = await waiting
            except BaseException:
                child.kill()  # the thread reaps it
                raise
            if data is None:
                log.warning("parsing in a second process failed; parsing here")
                parsed.update(await asyncio.to_thread(self._parse, set(theirs)))
            else:
                parsed.update(_decode(data, self._on_problem))
        self._deliver(changed, parsed)

    def _manifests(self) -> set[Path]:
        with os.scandir(self._dir) as entries:
            return {Path(e.path) for e in entries if e.is_file() and _is_manifest(Path(e.name))}

    def _reload(self, changed: set[Path]) -> None:
        self._deliver(changed, self._parse(changed))

    def _parse(self, changed: set[Path]) -> dict[Path, Objects | None]:
        parsed, problems = _parse_files(changed, self._kinds)
        for where, message in problems:
            self._on_problem(where, message)
        return parsed

    def _deliver(self, changed: set[Path], parsed: Mapping[Path, Objects | None]) -> None:
        for path in changed:
            if (objects := parsed[path]) is not None:
                self._files[path] = objects
            elif not path.is_file():
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
        # Imported here: in Kubernetes mode it (and multiprocessing, which it
        # pulls in) would only take memory.
        import watchfiles

        # step: wait this long for a burst of writes to end; debounce: but
        # never hold changes longer than this, so edits apply within a second.
        async for changes in watchfiles.awatch(
            self._dir, stop_event=stop, debounce=400, step=50, recursive=False
        ):
            paths = {Path(p) for _, p in changes}
            relevant = {p for p in paths if _is_manifest(p)}
            if relevant:
                self._reload(relevant)
