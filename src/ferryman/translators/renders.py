"""Rendering and rejection across kinds: the one thing a translator asks of
the others.

A host changes hands (an older Ingress claims a VirtualServer's host), a
Gateway's listener takes a port an Ingress asked for, a record is refused:
the resources on the other side of such a change are rendered again, whatever
their kind, and one that cannot be rendered is rejected. Translators do that
through ``Renders``, never through the worker: the queue, the flush and the
pushes stay the worker's alone (engine/controller.py), which asks the same
``Renders`` after a sync or a refusal.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from ferryman.report import REJECTED, WARNING
from ferryman.resources.meta import ObjectRef
from ferryman.translators import Translator, internal
from ferryman.translators.desired import Desired

log = logging.getLogger("ferryman.controller")


class Renders:
    def __init__(self, desired: Desired) -> None:
        self._d = desired
        self._by_kind: Mapping[str, Translator] = {}

    def register(self, translators: Iterable[Translator]) -> None:
        """The translators built for this worker: each renders its ``renders``."""
        self._by_kind = {kind: t for t in translators for kind in t.renders}

    def of(self, kind: str) -> Translator | None:
        """The translator rendering resources of ``kind`` (None: no one does)."""
        return self._by_kind.get(kind)

    def render_all(self, refs: Iterable[ObjectRef]) -> None:
        """Render each; one that fails is rejected and the others still render."""
        for ref in sorted(refs):
            try:
                self._by_kind[ref.kind].render(ref)
            except Exception as e:
                log.exception("render failed", extra={"fields": {"key": str(ref)}})
                self.reject(ref, internal(e))

    def reject(self, ref: ObjectRef, reason: str) -> None:
        """Take ``ref`` out of the configuration until it changes: withdraw what it
        wrote, hand its hosts to the next claimants, say why in a Rejected Event."""
        translator = self._by_kind[ref.kind]
        if translator.reject_itself(ref, reason):
            return
        d = self._d
        message = f"{ref.namespace}/{ref.name} was rejected: {reason}"
        d.event(ref, WARNING, REJECTED, message, translator.rejected_state)
        affected = d.config.delete(ref)
        try:
            d.forget_served(ref)
            d.drop_hosts_of(ref)
            d.declare(ref, ())
            d.endpoints.set_backends(ref, frozenset())
            translator.withdraw(ref)
        except Exception:
            log.exception("withdrawing records failed", extra={"fields": {"key": str(ref)}})
        self.render_all(affected - {ref})
