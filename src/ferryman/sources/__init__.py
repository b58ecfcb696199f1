"""Where objects come from: a manifests directory or the Kubernetes API.

A source delivers upserts and deletions of raw objects to a ``Sink`` and says
once when its initial state is complete.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from ferryman.engine.kind_spec import CORE, KindSpec, by_kind
from ferryman.resources.meta import ObjectRef

# Kind name -> spec: what a source reads.
Kinds = Mapping[str, KindSpec]


def manifest_kinds(kinds: Iterable[KindSpec]) -> dict[str, KindSpec]:
    """What a manifests directory may declare: the engine's own kinds (not
    Pods) and the registered ones (``ferryman.kinds.REGISTRY``)."""
    return by_kind((*CORE, *kinds))


class Sink(Protocol):
    def upsert(self, obj: Mapping[str, Any]) -> None: ...
    def delete(self, ref: ObjectRef) -> None: ...
