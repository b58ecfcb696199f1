"""The registered kinds' translators, in the order the worker consults them
(``translators.context.TranslatorFactory``): a new kind's translator is one
line here, as its ``KindSpec`` is one line of ``REGISTRY``."""

from __future__ import annotations

from collections.abc import Sequence

from ferryman.kinds.gateway.translate import gateway
from ferryman.kinds.ingress.translate import ingress
from ferryman.kinds.transport.translate import transport
from ferryman.kinds.virtualserver.translate import virtualserver
from ferryman.translators import Translator
from ferryman.translators.context import Context


def build(context: Context) -> Sequence[Translator]:
    return [
        ingress.build(context),
        virtualserver.build(context),
        transport.build(context),
        *gateway.build(context),
    ]
