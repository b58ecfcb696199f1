"""Object identity and the metadata every resource shares."""

from __future__ import annotations

import datetime
import logging
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

log = logging.getLogger("ferryman.controller")
T = TypeVar("T")


class ObjectRef(NamedTuple):
    """The identity of one object: what the queue holds and events name."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return (
            f"{self.kind} {self.namespace}/{self.name}"
            if self.namespace
            else (f"{self.kind} {self.name}")
        )


@dataclass(frozen=True)
class Meta:
    name: str
    namespace: str
    creation_timestamp: str | None = None
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)


class InvalidResource(ValueError):
    """A resource failed validation; ``errors`` are ``field: reason`` strings."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


def _str_map(value: object, where: str, errors: list[str]) -> dict[str, str]:
    """Annotations and labels: strings to strings, as the API server insists.

    A YAML ``true`` or a nested list in manifests mode is refused rather than
    turned into text: ``str()`` of an aliased structure can be gigabytes.
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        errors.append(f"{where}: must be a map of strings")
        return {}
    out: dict[str, str] = {}
    for k, v in value.items():
        if not isinstance(k, str):
            errors.append(f"{where}: keys must be strings, not {type(k).__name__}")
        elif not isinstance(v, str):
            errors.append(f"{where}[{k}]: must be a string, not {type(v).__name__}")
        else:
            out[k] = v
    return out


def _text(md: Mapping[str, Any], key: str, errors: list[str]) -> str:
    """An optional scalar field as text; numbers pass (hand-written manifests)."""
    value = md.get(key)
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, str | int):
        errors.append(f"metadata.{key}: must be a string")
        return ""
    return str(value)


def parse_meta(obj: Mapping[str, Any]) -> Meta:
    md = obj.get("metadata")
    if not isinstance(md, Mapping):
        raise InvalidResource(["metadata: required"])
    name = md.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidResource(["metadata.name: required"])
    errors: list[str] = []
    namespace = md.get("namespace") or ""
    if not isinstance(namespace, str):
        errors.append("metadata.namespace: must be a string")
        namespace = ""
    gen = md.get("generation", 0)
    meta = Meta(
        name=name,
        namespace=namespace,
        creation_timestamp=_timestamp_text(md.get("creationTimestamp"), errors),
        uid=_text(md, "uid", errors),
        resource_version=_text(md, "resourceVersion", errors),
        generation=gen if isinstance(gen, int) and not isinstance(gen, bool) else 0,
        annotations=_str_map(md.get("annotations"), "metadata.annotations", errors),
        labels=_str_map(md.get("labels"), "metadata.labels", errors),
    )
    if errors:
        raise InvalidResource(errors)
    return meta


# RFC 3339 in UTC to the second: already the text ``_timestamp_text`` makes
# (a string of this shape that is not a time, month 13, is kept as it is too).
_API_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")


def _timestamp_text(ts: object, errors: list[str]) -> str | None:
    """RFC 3339 in UTC with "Z", as the API server writes it, so text order is time order.

    Both sources hand over text (the manifests loader keeps YAML timestamps as
    text, as kubectl does); datetimes and dates, possibly with an offset, are
    read too. Text that is not a time is kept as it is.
    """
    if ts is None or ts == "":
        return None
    if isinstance(ts, str) and _API_TIME.fullmatch(ts):
        return ts  # the API server's own form, what every object of a cluster has
    if isinstance(ts, datetime.date) and not isinstance(ts, datetime.datetime):
        ts = ts.isoformat()
    if not isinstance(ts, str | datetime.datetime):
        errors.append("metadata.creationTimestamp: must be a time such as 2024-01-02T03:04:05Z")
        return None
    if isinstance(ts, str):
        try:
            when = datetime.datetime.fromisoformat(ts.replace("Z", "+00:00"))
        except ValueError:
            return ts
    else:
        when = ts
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    try:
        return when.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except OverflowError:  # year 1 with a positive offset: before the calendar starts
        errors.append("metadata.creationTimestamp: out of range")
        return None


def ref_of(obj: Mapping[str, Any]) -> ObjectRef | None:
    """The identity of a raw object, or None when it has no kind or name."""
    kind = obj.get("kind")
    md = obj.get("metadata")
    if not isinstance(kind, str) or not isinstance(md, Mapping):
        return None
    name = md.get("name")
    if not isinstance(name, str) or not name:
        return None
    # Kinds and namespaces repeat across thousands of objects: one string each.
    return ObjectRef(sys.intern(str(kind)), sys.intern(str(md.get("namespace") or "")), name)


def valid_or_none(
    parse: Callable[[Mapping[str, Any]], T], obj: Mapping[str, Any] | None
) -> T | None:
    """A Service, EndpointSlice, IngressClass or Pod; None when absent, or invalid (logged).

    The API server admits none of these invalid; hand-written manifests may.
    """
    if obj is None:
        return None
    try:
        return parse(obj)
    except InvalidResource as e:
        log.warning(
            "ignoring an invalid object",
            extra={"fields": {"object": str(ref_of(obj)), "reason": str(e)}},
        )
        return None
