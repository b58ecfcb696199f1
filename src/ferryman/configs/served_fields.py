"""Whether a parsed resource says only what a record's fast form can carry.

ngx_http_ferryman_module serves a route when every setting outside the ones
its F record holds is at its default (a VirtualServer's route, a Gateway's
HTTPRoute rule): a field added to a resource later is slow until the module
learns it, rather than silently dropped from the fast path.
"""

from __future__ import annotations

import dataclasses
from typing import Any


def defaults_except(obj: Any, served: frozenset[str]) -> bool:
    """Whether every field of dataclass ``obj`` outside ``served`` holds its default."""
    for f in dataclasses.fields(obj):
        if f.name in served:
            continue
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            return False  # a required field the module does not know
        if getattr(obj, f.name) != default:
            return False
    return True
