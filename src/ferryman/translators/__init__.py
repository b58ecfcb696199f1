"""Each kind's translator: a resource in the store -> records in ``Desired``.

The worker (controller.py) owns the queue, the flush and the pushes; it hands
each key to the translator of its kind and asks the translator of a resource to
render it again when host ownership or something it read changes. A new kind is
a parser (resources/), a translation (configs/) and a translator here; the
worker does not grow.

What a translator may call back: ``Worker.render_all`` (render these
resources, whatever their kind: a host handed from one kind to another),
``Worker.reject`` (take a resource out until it changes) and
``Worker.route_defaults`` (the ConfigMap's route-level keys, which annotations
override; every resource is rendered again when they change).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from ferryman.metrics import Metrics
from ferryman.resources.meta import ObjectRef


class Worker(Protocol):
    def render_all(self, refs: Iterable[ObjectRef]) -> None: ...

    def reject(self, ref: ObjectRef, reason: str) -> None: ...

    def route_defaults(self) -> Mapping[str, str]: ...


class Translator(Protocol):
    # The keys' kinds this translator syncs.
    kinds: tuple[str, ...]
    # The kinds whose resources it renders (host owners).
    renders: tuple[str, ...]
    # The status.state a Rejected Event reports (NIC's custom resources), or None.
    rejected_state: str | None

    def sync(self, ref: ObjectRef) -> None:
        """The key ``ref`` changed in the store."""
        ...

    def render(self, ref: ObjectRef) -> None:
        """Rewrite what ``ref`` (one of ``renders``) owns from the store as it is."""
        ...

    def withdraw(self, ref: ObjectRef) -> None:
        """``ref`` is rejected: forget what this translator keeps for it
        (its hosts and endpoint sets are already withdrawn)."""
        ...

    def reported(self, ref: ObjectRef, reason: str, message: str) -> None:
        """``ref``'s Event was reported: publish its status."""
        ...

    def waiting(self, refs: set[ObjectRef]) -> set[ObjectRef]:
        """Resources whose Events wait with ``refs`` (whose records NGINX does
        not hold yet), besides those."""
        ...

    def gauges(self, metrics: Metrics) -> None:
        """Set this kind's resource gauges."""
        ...


def internal(e: Exception) -> str:
    """A Rejected Event's reason for an exception no one expected."""
    return f"internal error ({type(e).__name__}: {e}); please report it"
