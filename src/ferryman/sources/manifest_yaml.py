"""Reading the YAML of a manifest file: fast, safe, and measured first.

``load_all`` measures the text before anything is built from it: how deep its
collections nest and how many nodes its aliases stand for (``_check_shape``).
libyaml's composer recurses once per nesting level, in C, so a few tens of
thousands of ``[`` overflow the stack and kill the process; and a few hundred
bytes of nested aliases ("billion laughs") stand for billions of nodes that
later code walks; an alias inside the collection it names makes a cycle. Text
over a limit, or with such a loop, raises ``Refused``. Then ``Loader`` builds
the documents: PyYAML's safe loader (libyaml's when present), with every
failure a YAMLError naming the line, and plain maps, lists and strings built
directly, compact as the store keeps them.

Apart from ``manifests.py``, which turns files into objects and watches the
directory, because this is about YAML text only and has its own limits.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import yaml

from ferryman.resources.raw import INTERN_MAX, compact

# libyaml's loader is ~10x faster on 10,000 manifests; PyPI wheels ship it.
if TYPE_CHECKING:
    _SafeLoader = yaml.SafeLoader
else:
    _SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Loader(_SafeLoader):
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
    """A node ``Loader._build`` leaves to PyYAML."""


_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_SPECIAL_KEYS = ("tag:yaml.org,2002:merge", "tag:yaml.org,2002:value")
# Scalars built here (PyYAML's constructor for each but str); any other tag is
# PyYAML's whole way: a !!set scalar, say, is an error there, not an empty set.
_PLAIN_SCALARS = frozenset(
    {_STR} | {f"tag:yaml.org,2002:{t}" for t in ("int", "float", "bool", "null")}
)


def _timestamp_as_text(loader: Loader, node: yaml.Node) -> object:
    return loader.construct_yaml_str(node)


def _int64(loader: Loader, node: yaml.Node) -> object:
    if not isinstance(node, yaml.ScalarNode):  # "!!int [1]"
        raise ValueError("not a scalar")
    value = loader.construct_yaml_int(node)
    if not -(2**63) <= value < 2**63:
        raise ValueError("out of int64's range")
    return value


Loader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_as_text)
Loader.add_constructor("tag:yaml.org,2002:int", _int64)


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


class Refused(Exception):
    """A file over one of the limits, or whose aliases loop; the message says which."""


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
    """Raise Refused when the file nests too deep or its aliases expand too far
    or loop.

    Walks libyaml's event stream, which its parser produces with an explicit
    stack (no recursion), before the composer builds anything. ``sizes`` holds,
    per open collection, the nodes it stands for so far, aliases expanded.
    """
    loader: Any = Loader(text)  # PyYAML's event methods carry no types
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
                    raise Refused(
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
                    raise Refused(
                        f"alias *{event.anchor} is inside the collection it names "
                        f"(line {event.start_mark.line + 1})"
                    )
                size = anchors.get(event.anchor, 1)
                aliased += size
                sizes[-1] += size
                if aliased > (limit := max(MAX_ALIAS_NODES, written)):
                    raise Refused(
                        f"aliases stand for more than {limit} nodes "
                        f"(line {event.start_mark.line + 1})"
                    )
    finally:
        loader.dispose()


def load_all(text: str) -> list[Any]:
    """The documents in ``text``; raises ``Refused`` when it nests too deep or its
    aliases expand too far or loop, a YAMLError when it is not valid YAML."""
    if not _obviously_small(text):
        _check_shape(text)
    return list(yaml.load_all(text, Loader=Loader))
