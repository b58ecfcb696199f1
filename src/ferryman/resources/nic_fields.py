"""Reading NIC's custom resources field by field, with NIC's problem format.

NIC (github.com/nginx/kubernetes-ingress) reports a rejected VirtualServer,
VirtualServerRoute or Policy with Kubernetes' field errors, for example
``spec.upstreams[0].port: Invalid value: 0: must be between 1 and 65535,
inclusive``. Users grep for those texts and tools match them, so ferryman
produces the same shape (:class:`Problem`).

The objects arrive as the API server returns them (typed by the CRD's schema)
or, in manifests mode, as any YAML: :class:`Obj` checks each value's type,
reports keys the schema does not have (``kubectl apply`` refuses them too,
and a silently ignored typo such as ``lb_method`` would change behaviour), and
records which keys each parser reads so a test can hold the CRDs and the
parsers to the same fields.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

from ferryman.resources.meta import InvalidResource, Meta, parse_meta

T = TypeVar("T")

# Kubernetes' field error types (k8s.io/apimachinery/pkg/util/validation/field).
INVALID: Final = "Invalid value"
REQUIRED: Final = "Required value"
FORBIDDEN: Final = "Forbidden"
DUPLICATE: Final = "Duplicate value"
NOT_FOUND: Final = "Not found"
UNKNOWN: Final = "Unknown field"
TOO_MANY: Final = "Too many"


class _Omitted:
    def __repr__(self) -> str:
        return "OMITTED"


OMITTED: Final = _Omitted()


@dataclass(frozen=True)
class Problem:
    """One reason a resource is invalid: a field path, an error type, a detail."""

    field: str
    kind: str
    detail: str = ""
    value: object = OMITTED

    def __str__(self) -> str:
        body = self.kind
        if self.kind in (INVALID, DUPLICATE, NOT_FOUND, TOO_MANY) and self.value is not OMITTED:
            body += f": {_go_value(self.value)}"
        if self.detail:
            body += f": {self.detail}"
        return f"{self.field}: {body}"


def _go_value(value: object) -> str:
    """A bad value as Go's field errors print it: strings quoted, the rest as JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, ensure_ascii=False)


def invalid(where: str, value: object, detail: str) -> Problem:
    return Problem(where, INVALID, detail, value)


def required(where: str, detail: str = "") -> Problem:
    return Problem(where, REQUIRED, detail)


def forbidden(where: str, detail: str) -> Problem:
    return Problem(where, FORBIDDEN, detail)


def duplicate(where: str, value: object) -> Problem:
    return Problem(where, DUPLICATE, "", value)


def not_found(where: str, value: object) -> Problem:
    return Problem(where, NOT_FOUND, "", value)


def not_supported(where: str, reason: str) -> Problem:
    """A field NIC accepts that ferryman refuses rather than silently ignores."""
    return forbidden(where, f"not supported by ferryman: {reason}")


@dataclass
class Context:
    """What one parse collects: its problems, and the keys each object type was read for."""

    problems: list[Problem] = field(default_factory=list)
    # schema path ("spec.upstreams[].tls") -> keys a parser reads there
    read: dict[str, set[str]] = field(default_factory=dict)

    def add(self, problem: Problem) -> None:
        self.problems.append(problem)

    def extend(self, problems: list[Problem]) -> None:
        self.problems.extend(problems)


@dataclass(frozen=True)
class Parsed(Generic[T]):
    """A parse's outcome: the resource when it is valid, else None and every problem."""

    resource: T | None
    problems: tuple[Problem, ...]

    def message(self) -> str:
        """The problems as NIC's status message and Event show them (Kubernetes' aggregate
        error: one as it is, several de-duplicated between brackets)."""
        texts = list(dict.fromkeys(str(p) for p in self.problems))
        if len(texts) <= 1:
            return "".join(texts)
        return f"[{', '.join(texts)}]"


def parse_object_meta(obj: Mapping[str, Any], ctx: Context) -> Meta | None:
    try:
        return parse_meta(obj)
    except InvalidResource as e:
        for error in e.errors:
            where, _, detail = error.partition(": ")
            ctx.add(required(where) if detail == "required" else Problem(where, INVALID, detail))
        return None


_TYPE_NAMES = {str: "string", int: "integer", bool: "boolean"}


class Obj:
    """One JSON object of a resource: typed reads of its declared keys.

    A key that is absent or null reads as the type's zero value ("" / None),
    as Go's decoder gives NIC; a value of another type is a problem.
    """

    def __init__(
        self,
        ctx: Context,
        raw: Mapping[str, object],
        path: str,
        schema: str,
        keys: frozenset[str],
    ) -> None:
        self.ctx = ctx
        self.raw = raw
        self.path = path
        self.schema = schema
        ctx.read.setdefault(schema, set()).update(keys)
        for key in raw:
            if key not in keys:
                ctx.add(Problem(self.at(str(key)), UNKNOWN))

    @classmethod
    def root(cls, ctx: Context, raw: object, path: str, keys: frozenset[str]) -> Obj | None:
        if raw is None:
            ctx.add(required(path))
            return None
        if not isinstance(raw, Mapping):
            ctx.add(invalid(path, _shown(raw), "must be of type object"))
            return None
        return cls(ctx, raw, path, path, keys)

    def at(self, key: str) -> str:
        return f"{self.path}.{key}"

    def has(self, key: str) -> bool:
        return self.raw.get(key) is not None

    def _typed(self, key: str, kind: type) -> object:
        value = self.raw.get(key)
        if value is None:
            return None
        # bool is an int to Python, never to JSON
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            self.ctx.add(
                invalid(self.at(key), _shown(value), f"must be of type {_TYPE_NAMES[kind]}")
            )
            return None
        return value

    def text(self, key: str) -> str:
        value = self._typed(key, str)
        return value if isinstance(value, str) else ""

    def integer(self, key: str) -> int | None:
        value = self._typed(key, int)
        return value if isinstance(value, int) else None

    def boolean(self, key: str) -> bool | None:
        value = self._typed(key, bool)
        return value if isinstance(value, bool) else None

    def obj(self, key: str, keys: frozenset[str]) -> Obj | None:
        value = self.raw.get(key)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            self.ctx.add(invalid(self.at(key), _shown(value), "must be of type object"))
            return None
        return Obj(self.ctx, value, self.at(key), f"{self.schema}.{key}", keys)

    def _list(self, key: str) -> list[object] | None:
        value = self.raw.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            self.ctx.add(invalid(self.at(key), _shown(value), "must be of type array"))
            return None
        return value

    def objs(self, key: str, keys: frozenset[str]) -> list[Obj]:
        """Each object of a list; a non-object item is a problem and skipped."""
        out = []
        for i, item in enumerate(self._list(key) or ()):
            where = f"{self.at(key)}[{i}]"
            if not isinstance(item, Mapping):
                self.ctx.add(invalid(where, _shown(item), "must be of type object"))
                continue
            out.append(Obj(self.ctx, item, where, f"{self.schema}.{key}[]", keys))
        return out

    def str_items(self, key: str) -> list[tuple[str, str]] | None:
        """A list of strings with each item's path; None when absent (NIC's nil slice)."""
        items = self._indexed(key, str)
        return None if items is None else [(w, v) for w, v in items if isinstance(v, str)]

    def int_items(self, key: str) -> list[tuple[str, int]] | None:
        items = self._indexed(key, int)
        return None if items is None else [(w, v) for w, v in items if isinstance(v, int)]

    def _indexed(self, key: str, kind: type) -> list[tuple[str, object]] | None:
        items = self._list(key)
        if items is None:
            return None
        out = []
        for i, item in enumerate(items):
            where = f"{self.at(key)}[{i}]"
            if not isinstance(item, kind) or (kind is int and isinstance(item, bool)):
                self.ctx.add(invalid(where, _shown(item), f"must be of type {_TYPE_NAMES[kind]}"))
                continue
            out.append((where, item))
        return out

    def strs(self, key: str) -> tuple[str, ...] | None:
        items = self.str_items(key)
        return None if items is None else tuple(v for _, v in items)

    def str_map(self, key: str) -> dict[str, str] | None:
        value = self.raw.get(key)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            self.ctx.add(invalid(self.at(key), _shown(value), "must be of type object"))
            return None
        out: dict[str, str] = {}
        for k, v in value.items():
            if not isinstance(k, str) or not isinstance(v, str):
                self.ctx.add(invalid(f"{self.at(key)}[{k}]", _shown(v), "must be of type string"))
                continue
            out[k] = v
        return out


def _shown(value: object) -> object:
    """A wrongly typed value as a problem shows it: JSON-able and short."""
    if value is None or isinstance(value, str | int | float | bool):
        return value if not isinstance(value, str) or len(value) <= 100 else value[:100] + "..."
    return type(value).__name__
