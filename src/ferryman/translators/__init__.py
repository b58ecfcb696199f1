"""Each kind's translator: a resource in the store -> records in ``Desired``.

The worker (engine/controller.py) owns the queue, the flush and the pushes; it hands
each key to the translator of its kind, and tells every translator of what any
of them may read (``touch``) and of each flush. A new kind is a package of
``ferryman.kinds`` with its translator; the worker does not grow.

A translator never calls the worker back. What it reaches beyond its own kind
is in its ``Context``: ``Desired`` (the records, Events and host ownership all
kinds share), ``Renders`` (render other resources again, whatever their kind,
or reject one: a host handed from one kind to another) and the ConfigMap's
route-level defaults.
"""

from __future__ import annotations

from collections.abc import Mapping

from ferryman.observability.metrics import Metrics
from ferryman.resources.meta import ObjectRef


class Translator:
    """What the worker asks of a kind's translator. The worker names no kind:
    every kind-specific step is one of these hooks (the defaults do nothing)."""

    # The keys' kinds this translator syncs.
    kinds: tuple[str, ...] = ()
    # The kinds whose resources it renders (host owners).
    renders: tuple[str, ...] = ()
    # The status.state a Rejected Event reports (NIC's custom resources), or None.
    rejected_state: str | None = None
    # The record kinds it writes besides host records (their refusals are its own).
    records: tuple[str, ...] = ()

    def sync(self, ref: ObjectRef) -> None:
        """The key ``ref`` changed in the store."""
        raise NotImplementedError

    def render(self, ref: ObjectRef) -> None:
        """Rewrite what ``ref`` (one of ``renders``) owns from the store as it is."""
        raise NotImplementedError

    def withdraw(self, ref: ObjectRef) -> None:
        """``ref`` is rejected: forget what this translator keeps for it
        (its hosts and endpoint sets are already withdrawn)."""

    def reject_itself(self, ref: ObjectRef, reason: str) -> bool:
        """Take ``ref`` out in this kind's own way (True), instead of the
        worker's host-owner rejection (False)."""
        return False

    def shed(self, ref: ObjectRef, why: str) -> bool:
        """NGINX had no room for ``ref``'s host record: leave a share of it out
        (True), or not (False: ``ref`` is rejected)."""
        return False

    def holder(self, kind: str, name: str) -> ObjectRef | None:
        """The resource record ``kind``:``name`` (one of ``records``) is written for."""
        return None

    def refuse_record(self, kind: str, name: str, why: str) -> None:
        """NGINX refused record ``kind``:``name`` (one of ``records``)."""

    def refuse_ports(self, ports: Mapping[int, str]) -> bool:
        """NGINX could not bind ``ports`` (port -> its reason): what of this
        kind asked for them is left out; True when something did."""
        return False

    def touch(self) -> None:
        """Something any resource may read changed (a Service, a Namespace,
        the ports someone holds): what depends on it is computed again."""

    def set_addresses(self, addresses: tuple[str, ...]) -> None:
        """The addresses status reports changed."""

    def before_flush(self) -> None:
        """Records are about to be pushed (and again after NGINX refused some)."""

    def after_flush(self) -> None:
        """The flush is done and its Events reported: publish status."""

    def reported(self, ref: ObjectRef, reason: str, message: str) -> None:
        """``ref``'s Event was reported: publish its status."""

    def waiting(self, refs: set[ObjectRef]) -> set[ObjectRef]:
        """Resources whose Events wait with ``refs`` (whose records NGINX does
        not hold yet), besides those."""
        return set()

    def gauges(self, metrics: Metrics) -> None:
        """Set this kind's resource gauges."""


def internal(e: Exception) -> str:
    """A Rejected Event's reason for an exception no one expected."""
    return f"internal error ({type(e).__name__}: {e}); please report it"
