"""Which namespaces a Gateway API ``from`` admits (All, Same, Selector, None):
a listener's allowedRoutes for routes, a Gateway's allowedListeners for
ListenerSets (pure)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

# A namespace's labels (Selector), None when it does not exist.
NamespaceLabels = Callable[[str], Mapping[str, str] | None]


def namespace_allowed(
    from_: str,
    selector: Mapping[str, Any] | None,
    home: str,
    namespace: str,
    namespace_labels: NamespaceLabels,
) -> bool:
    """Whether ``from_`` of an object in namespace ``home`` admits ``namespace``."""
    if from_ == "All":
        return True
    if from_ == "Same":
        return namespace == home
    if from_ != "Selector":
        return False
    labels = namespace_labels(namespace)
    return labels is not None and selects(selector or {}, labels)


def selects(selector: Mapping[str, object], labels: Mapping[str, str]) -> bool:
    """A label selector (matchLabels and matchExpressions) against ``labels``."""
    match_labels = selector.get("matchLabels") or {}
    if isinstance(match_labels, Mapping) and any(
        labels.get(str(k)) != v for k, v in match_labels.items()
    ):
        return False
    expressions = selector.get("matchExpressions") or []
    for e in expressions if isinstance(expressions, list) else []:
        if not isinstance(e, Mapping):
            return False
        key, op, values = str(e.get("key")), e.get("operator"), e.get("values") or []
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True
