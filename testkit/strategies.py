"""Hypothesis strategies more than one test module draws from."""

from __future__ import annotations

import copy
import datetime
from typing import Any

from hypothesis import strategies as st

# A DNS label as Kubernetes names namespaces, Services and port names.
dns_labels = st.from_regex(r"[a-z]([-a-z0-9]{0,10}[a-z0-9])?", fullmatch=True)

# "namespace/service:port", the port by number or by name (configs.model.backend_key).
backend_keys = st.builds(
    lambda ns, svc, port: f"{ns}/{svc}:{port}",
    dns_labels,
    dns_labels,
    st.one_of(st.integers(1, 65535).map(str), dns_labels),
)


# ---- hostile shapes: what a YAML or JSON document can hand a parser ------------------

_PLUS_0530 = datetime.timezone(datetime.timedelta(hours=5, minutes=30))
# Offsets before 1972 had seconds: PyYAML's own timestamp constructor fails on them.
_LOCAL_MEAN_TIME = datetime.timezone(-datetime.timedelta(hours=5, minutes=48, seconds=52))
# Scalars PyYAML's safe loader produces: timestamps and dates, !!binary bytes,
# and text with digits from other scripts, surrogates and control characters.
yaml_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=12),
    st.sampled_from(["", "0", "²", "٣", "80", "-1", "1e3", "true", "10.0.0.1\nH x", "\ud800"]),
    st.datetimes(timezones=st.sampled_from([None, datetime.UTC, _PLUS_0530, _LOCAL_MEAN_TIME])),
    st.dates(),
    st.binary(max_size=8),
)
# Mapping keys must be hashable: every scalar is.
yaml_values = st.recursive(
    yaml_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(yaml_scalars, inner, max_size=4),
    ),
    max_leaves=12,
)


def _paths(node: object, prefix: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Every place in a JSON-like tree a value can be put or taken away."""
    found = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            found += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            found += _paths(v, (*prefix, i))
    return found


@st.composite
def mutations(draw: st.DrawFn, valid: object, max_changes: int = 3) -> object:
    """``valid`` with a few values replaced, removed or given new siblings.

    Random shapes rarely get past ``metadata``; changing a valid object reaches
    every branch behind it.
    """
    obj = copy.deepcopy(valid)
    for _ in range(draw(st.integers(1, max_changes))):
        path = draw(st.sampled_from(_paths(obj)))
        if not path:
            continue
        *parents, last = path
        parent: Any = obj
        for step in parents:
            parent = parent[step]
        action = draw(st.sampled_from(["replace", "remove", "add"]))
        if action == "replace":
            parent[last] = draw(yaml_values)
        elif action == "remove":
            del parent[last]
        elif isinstance(parent, dict):
            parent[draw(yaml_scalars)] = draw(yaml_values)
        else:
            parent.insert(draw(st.integers(0, len(parent))), draw(yaml_values))
    return obj
