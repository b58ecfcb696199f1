"""Object identity and the metadata every resource shares."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple


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


def _str_map(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): str(v) for k, v in value.items()}


def parse_meta(obj: Mapping[str, Any]) -> Meta:
    md = obj.get("metadata")
    if not isinstance(md, Mapping):
        raise InvalidResource(["metadata: required"])
    name = md.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidResource(["metadata.name: required"])
    namespace = md.get("namespace") or ""
    ts = md.get("creationTimestamp")
    gen = md.get("generation", 0)
    return Meta(
        name=name,
        namespace=str(namespace),
        # YAML may hand us a datetime for an unquoted timestamp; normalise to text.
        creation_timestamp=_timestamp_text(ts),
        uid=str(md.get("uid") or ""),
        resource_version=str(md.get("resourceVersion") or ""),
        generation=gen if isinstance(gen, int) else 0,
        annotations=_str_map(md.get("annotations")),
        labels=_str_map(md.get("labels")),
    )


def _timestamp_text(ts: object) -> str | None:
    """RFC 3339 in UTC with "Z", as the API server writes it, so text order is time order.

    YAML hands over unquoted timestamps as datetimes, possibly with an offset.
    """
    if ts is None or ts == "":
        return None
    if not isinstance(ts, datetime.datetime):
        try:
            ts = datetime.datetime.fromisoformat(str(ts).replace("Z", "+00:00"))
        except ValueError:
            return str(ts)
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=datetime.UTC)
    return ts.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def ref_of(obj: Mapping[str, Any]) -> ObjectRef | None:
    """The identity of a raw object, or None when it has no kind or name."""
    kind = obj.get("kind")
    md = obj.get("metadata")
    if not isinstance(kind, str) or not isinstance(md, Mapping):
        return None
    name = md.get("name")
    if not isinstance(name, str) or not name:
        return None
    return ObjectRef(kind, str(md.get("namespace") or ""), name)
