"""Editing a NIC resource fixture by field path, for the rule tests."""

from __future__ import annotations

import copy
import re
from typing import Any

DELETE = object()


def edited(doc: dict[str, Any], *changes: tuple[str, Any]) -> dict[str, Any]:
    """A copy of ``doc`` with each ``("spec.upstreams[0].port", value)`` set (DELETE removes)."""
    out = copy.deepcopy(doc)
    for path, value in changes:
        keys: list[str | int] = []
        for part in path.split("."):
            name, *indexes = re.split(r"\[(\d+)\]", part)
            keys.append(name)
            keys += [int(i) for i in indexes if i]
        node: Any = out
        for key in keys[:-1]:
            node = node[key]
        if value is DELETE:
            del node[keys[-1]]
        else:
            node[keys[-1]] = copy.deepcopy(value)
    return out
