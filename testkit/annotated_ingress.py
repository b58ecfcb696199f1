"""The annotated Ingress on one host that the annotation tests start with real backends.

Moved from tests/integration/test_ingress_annotations.py, whose tests and others share them."""

from __future__ import annotations

from typing import Any

from testkit.harness import (
    Backends,
    Ferryman,
    ingress,
    path,
    rule,
    service_with_backends,
)

HOST = "ann.test"


def annotated(annotations: dict[str, str], *paths: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return ingress(
        "ann", [rule(HOST, *(paths or (path("/", "app"),)))], annotations=annotations, **kw
    )


def start(
    f: Ferryman, backends: Backends, *docs: dict[str, Any], names: tuple[str, ...] = ("a",)
) -> None:
    f.write("svc", service_with_backends("app", [backends.start(n) for n in names]))
    for i, d in enumerate(docs):
        f.write(f"doc{i}", d)
    f.start()


def last(f: Ferryman, name: str = "ann") -> dict[str, str]:
    return f.events_for(name)[-1]
