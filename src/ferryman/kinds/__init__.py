"""ferryman's resource kinds, one package per family: its parsers (``parse/``),
the records it becomes (``records/``), its translator (``translate/``) and the
``KindSpec`` values the engine reads it by (``spec.py``).

``REGISTRY`` is every kind ferryman serves; the composition root hands it to
the engine, which names no kind of these packages itself.
"""

from __future__ import annotations

from typing import Any

from ferryman.engine.kind_spec import KindSpec, by_kind
from ferryman.kinds.gateway.spec import SPECS as GATEWAY
from ferryman.kinds.ingress.spec import SPECS as INGRESS
from ferryman.kinds.policy.spec import SPECS as POLICY
from ferryman.kinds.transport.spec import SPECS as TRANSPORT
from ferryman.kinds.virtualserver.spec import SPECS as VIRTUALSERVER
from ferryman.resources import nic_crds

REGISTRY: tuple[KindSpec, ...] = (
    *INGRESS,
    *VIRTUALSERVER,
    *POLICY,
    *TRANSPORT,
    *GATEWAY,
)


def crd(kind: str) -> dict[str, Any]:
    """The CustomResourceDefinition ferryman ships for ``kind``."""
    return by_kind(REGISTRY)[kind].crd_object()


def crd_files() -> dict[str, str]:
    """File name -> YAML of every CRD ferryman ships (deploy/crds, the chart's crds/)."""
    return nic_crds.files(REGISTRY)
