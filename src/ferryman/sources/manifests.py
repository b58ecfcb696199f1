"""Manifests mode: every ``*.yaml``/``*.yml`` file of one directory, watched.

Files may hold several documents; JSON is YAML. A file that fails to parse
keeps its previous objects (a half-written edit must not take routes down) and
is reported with the parser's line and column. When two files define the same
object, the file whose name sorts first wins and the other is reported.
Namespaced objects without a namespace land in "default", as with kubectl.

A file is measured before anything is built from it: its size, how deep its
collections nest and how many nodes its aliases stand for (see ``_check_shape``).
libyaml's composer recurses once per nesting level, in C, so a few tens of
thousands of ``[`` overflow the stack and kill the process; and a few hundred
bytes of nested aliases ("billion laughs") stand for billions of nodes that
later code walks; an alias inside the collection it names makes a cycle. A file
over a limit, or with such a loop, is reported and keeps its previous objects.
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
from typing import TYPE_CHECKING, Any

import yaml

from ferryman.resources.meta import ObjectRef, ref_of
from ferryman.resources.raw import INTERN_MAX, Packed, compact, pack
from ferryman.sources import CLUSTER_SCOPED, KINDS, Sink, forked

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

# libyaml's loader is ~10x faster on 10,000 manifests; PyPI wheels ship it.
if TYPE_CHECKING:
    _SafeLoader = yaml.SafeLoader
else:
    _SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_SafeLoader):
    """The safe loader, with every failure a YAMLError that names the line.

    PyYAML's constructors raise what Python raises: ``!!int x`` ValueError,
    ``!!bool x`` KeyError, ``!!int`` with no digits IndexError, 5,000 digits
    ValueError (Python's limit for int()), all of which escaped the reader.
    Timestamps stay text, as kubectl keeps them: PyYAML resolves ``2024-02-30``
    as one, then cannot build it, and an
    unquoted date in an annotation is a string to the API server. Integers are
    the API's int64: a larger one is refused (``str()`` of a 5,000-digit one
    raises, and no field takes one).
    """

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError, OverflowError) as e:
            shown = f" {node.value[:40]!r}" if isinstance(node, yaml.ScalarNode) else ""
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read {node.tag}{shown}", node.start_mark
            ) from e

    def resolve(self, kind: type[yaml.Node], value: Any, implicit: Any) -> Any:
        """PyYAML's, less what it does per scalar for what this loader lacks:
        path resolvers and resolvers for any first character. libyaml's parser
        calls this for every scalar (a million at 10,000 Ingresses)."""
        if kind is yaml.ScalarNode:
            if implicit[0]:
                for tag, regexp in self.yaml_implicit_resolvers.get(value[:1], ()):
                    if regexp.match(value):
                        return tag
            return _STR
        return super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]

    def construct_document(self, node: yaml.Node) -> Any:
        """Plain maps, lists and strings built directly; the rest as PyYAML does.

        PyYAML's constructor (Python, even with libyaml's parser) was half of
        the start-up at 10,000 Ingresses: per node a generator, a recursion
        guard and a cache entry. Manifests are maps, lists and strings; this
        builds those (and asks PyYAML for every other scalar, so ints, bools and
        nulls read as before) in a third of the time. A merge key, a ``=`` key,
        a key that is a collection or an alias sends the document the whole way
        through PyYAML.

        Either way the result is what the store keeps (``raw.pack`` with
        ``compacted``): a tree of its own, no map or list in two places, short
        strings interned (``raw.compact``), which this does while building
        rather than in another walk.
        """
        try:
            data = self._build(node, set())
        except (_Unusual, yaml.constructor.ConstructorError):
            # A scalar it refuses, too: PyYAML's order of construction decides which
            # one is reported. What the attempt constructed or left to finish is
            # not PyYAML's to reuse.
            self.constructed_objects = {}
            self.recursive_objects = {}
            self.state_generators = []
            self.deep_construct = False
            return compact(super().construct_document(node))
        finally:
            self.constructed_objects = {}
        return data

    def _build(self, node: yaml.Node, seen: set[int]) -> Any:
        kind = type(node)
        if kind is yaml.ScalarNode:
            if node.tag not in _PLAIN_SCALARS:  # !!set, !!binary, !!timestamp, ...
                raise _Unusual
            value = node.value if node.tag == _STR else self.construct_object(node)
            if type(value) is str and len(value) <= INTERN_MAX:
                return sys.intern(value)
            return value
        if id(node) in seen:  # an alias of a collection: PyYAML shares one object
            raise _Unusual
        seen.add(id(node))
        if kind is yaml.MappingNode and node.tag == _MAP:
            mapping: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                if type(key_node) is not yaml.ScalarNode or key_node.tag in _SPECIAL_KEYS:
                    raise _Unusual
                mapping[self._build(key_node, seen)] = self._build(value_node, seen)
            return mapping
        if kind is yaml.SequenceNode and node.tag == _SEQ:
            return [self._build(item, seen) for item in node.value]
        raise _Unusual


class _Unusual(Exception):
    """A node ``_Loader._build`` leaves to PyYAML."""


_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_SPECIAL_KEYS = ("tag:yaml.org,2002:merge", "tag:yaml.org,2002:value")
# Scalars built here (PyYAML's constructor for each but str); any other tag is
# PyYAML's whole way: a !!set scalar, say, is an error there, not an empty set.
_PLAIN_SCALARS = frozenset(
    {_STR} | {f"tag:yaml.org,2002:{t}" for t in ("int", "float", "bool", "null")}
)


def _timestamp_as_text(loader: _Loader, node: yaml.Node) -> object:
    return loader.construct_yaml_str(node)


def _int64(loader: _Loader, node: yaml.Node) -> object:
    if not isinstance(node, yaml.ScalarNode):  # "!!int [1]"
        raise ValueError("not a scalar")
    value = loader.construct_yaml_int(node)
    if not -(2**63) <= value < 2**63:
        raise ValueError("out of int64's range")
    return value


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_as_text)
_Loader.add_constructor("tag:yaml.org,2002:int", _int64)

# The API server takes request bodies up to 3 MiB and etcd stores objects up to
# 1.5 MiB; 16 MiB holds ten thousand ordinary Ingresses in one file, and keeps
# the memory one file can take (a few hundred MB once built) bounded.
MAX_FILE_BYTES = 16 * 1024 * 1024
# Built-in objects nest about 12 levels; a CRD's validation schema (which may
# share a file with Ingresses) takes two levels per level of its objects.
# libyaml's composer overflowed the 8 MiB main-thread stack between 20,000 and
# 30,000 levels here, and comparing two objects recurses in Python (limit
# 1,000): 256 is generous and far from both.
MAX_DEPTH = 256
# Aliases may stand for at most this many nodes, or as many as the file writes
# out itself if that is more: a shared block of labels reused by every object
# stays well inside, while expansion stays linear in the file's size (go-yaml,
# which kubectl uses, also bounds aliasing by a ratio to the document's size).
MAX_ALIAS_NODES = 100_000
_OPEN = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSE = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


class _Refused(Exception):
    """A file over one of the limits, or whose aliases loop; the message says which."""


def _is_manifest(path: Path) -> bool:
    return path.suffix in (".yaml", ".yml") and not path.name.startswith(".")


def parse_file(path: Path, on_problem: ProblemHandler) -> Objects | None:
    """The objects in one file, or None when the file cannot be parsed at all."""
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
        if not _obviously_small(text):
            _check_shape(text)
        docs = list(yaml.load_all(text, Loader=_Loader))
    except _Refused as e:
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
            _add(objects, obj, f"{path} (document {i + 1})", on_problem)
    return objects


def nesting_bound(text: str) -> int:
    """An upper bound of how deep the collections in ``text`` nest.

    Every collection starts with a character of its own: ``[`` or ``{`` in flow
    style, ``-`` (sequence) or ``:``/``?`` (mapping) in block style. Counting
    them all, in scalars too, can only overcount.
    """
    return sum(text.count(c) for c in "[{-:?")


def _obviously_small(text: str) -> bool:
    """True when ``text`` can neither nest too deep nor hold an alias (no ``*``).

    Walking the events costs half as much again as loading; a file per
    application, the common layout, skips it.
    """
    return "*" not in text and nesting_bound(text) <= MAX_DEPTH


def _check_shape(text: str) -> None:
    """Raise _Refused when the file nests too deep or its aliases expand too far
    or loop.

    Walks libyaml's event stream, which its parser produces with an explicit
    stack (no recursion), before the composer builds anything. ``sizes`` holds,
    per open collection, the nodes it stands for so far, aliases expanded.
    """
    loader: Any = _Loader(text)  # PyYAML's event methods carry no types
    sizes = [0]  # the stream itself at the bottom, so a node always has a parent
    anchors: dict[str, int] = {}
    opened: list[str | None] = []  # the anchor of each open collection
    written = aliased = 0
    try:
        while (event := loader.get_event()) is not None:
            kind = type(event)  # most events are scalars: test the cheap way first
            if kind is yaml.ScalarEvent:
                written += 1
                sizes[-1] += 1
                if event.anchor is not None:
                    anchors[event.anchor] = 1
            elif kind in _OPEN:
                written += 1
                if len(sizes) > MAX_DEPTH:
                    raise _Refused(
                        f"collections nest deeper than {MAX_DEPTH} levels "
                        f"(line {event.start_mark.line + 1})"
                    )
                sizes.append(1)
                opened.append(event.anchor)
            elif kind in _CLOSE:
                size = sizes.pop()
                sizes[-1] += size
                if (anchor := opened.pop()) is not None:
                    anchors[anchor] = size
            elif kind is yaml.AliasEvent:
                if event.anchor in opened:
                    # A collection holding itself: a cycle every comparison of
                    # two versions of the object recursed on until RecursionError.
                    raise _Refused(
                        f"alias *{event.anchor} is inside the collection it names "
                        f"(line {event.start_mark.line + 1})"
                    )
                size = anchors.get(event.anchor, 1)
                aliased += size
                sizes[-1] += size
                if aliased > (limit := max(MAX_ALIAS_NODES, written)):
                    raise _Refused(
                        f"aliases stand for more than {limit} nodes "
                        f"(line {event.start_mark.line + 1})"
                    )
    finally:
        loader.dispose()


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
    elif kind in CLUSTER_SCOPED and md.get("namespace"):
        # kubectl ignores it; kept, the object would be looked for in vain.
        obj = {**obj, "metadata": {k: v for k, v in md.items() if k != "namespace"}}
    ref = ref_of(obj)
    assert ref is not None
    if ref in objects:
        on_problem(where, f"{ref} is defined twice in this file; the first one is used")
        return
    objects[ref] = obj


def _parse_files(paths: Iterable[Path]) -> tuple[dict[Path, Objects | None], list[Problem]]:
    """Each file's objects, slim and packed as the store keeps them (they
    are held by the source too), None for a file gone or that cannot be read;
    and the problems found, in order."""
    problems: list[Problem] = []
    parsed: dict[Path, Objects | None] = {}
    for path in paths:
        objects = parse_file(path, lambda w, m: problems.append((w, m))) if path.is_file() else None
        if objects is not None:  # the loader built them compact
            parsed[path] = {r: pack(o, compacted=True) for r, o in objects.items()}
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
    def __init__(self, directory: Path, sink: Sink, on_problem: ProblemHandler) -> None:
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
            child = forked.fork(lambda: _encode(*_parse_files(theirs)))
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
        parsed, problems = _parse_files(changed)
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
