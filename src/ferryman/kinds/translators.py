"""The registered kinds' translators, in the order the worker consults them
(``translators.context.TranslatorFactory``): a new kind's translator is one
line here, as its ``KindSpec`` is one line of ``REGISTRY``.

A kind read only behind a flag has its translator imported only when the flag
is on: Gateway API's modules are ~90 dataclasses and ~50 ms of a start that
does not serve it (issue 31; tests/unit/test_footprint.py)."""

from __future__ import annotations

from collections.abc import Sequence

from ferryman.kinds.ingress.translate import ingress
from ferryman.kinds.transport.translate import transport
from ferryman.kinds.virtualserver.translate import virtualserver
from ferryman.translators import Translator
from ferryman.translators.context import Context


def build(context: Context) -> Sequence[Translator]:
    translators: list[Translator] = [
        ingress.build(context),
        virtualserver.build(context),
        transport.build(context),
    ]
    if context.settings.gateway.enabled:  # --enable-gateway-api
        from ferryman.kinds.gateway.translate import gateway

        translators.extend(gateway.build(context))
    return translators
