"""The Ingresses one host's translation reads besides its own: the masters and
minions of a mergeable host, and the ingress-nginx canaries of a host.

Both are found by host across every Ingress, so a reader depends on a key of
the host (``MERGEABLE_HOST``/``CANARY_HOST``), and the Ingress translator marks
that key's readers stale when an Ingress of the host changes. The parses are
kept here (``HostIngresses``, one per engine cache) until their Ingress changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ferryman.engine.reads import Reads
from ferryman.engine.store import Store
from ferryman.kinds.ingress.parse.annotations import MERGEABLE
from ferryman.kinds.ingress.parse.ingress import Ingress, parse_ingress
from ferryman.kinds.ingress.parse.ingress_nginx_canary import PREFIX as INGRESS_NGINX
from ferryman.resources.meta import InvalidResource, ObjectRef

# Mergeable Ingresses are read by host: a change to a master or minion of a
# host translates the readers of ``ObjectRef(MERGEABLE_HOST, "", host)``.
MERGEABLE_HOST = "MergeableIngressHost"
# Canary Ingresses (ingress-nginx's) likewise: a change to a canary of a host,
# or to the host's main Ingress, translates the readers of this key's host.
CANARY_HOST = "CanaryIngressHost"
CANARY = INGRESS_NGINX + "canary"

_Key = tuple[str, str]


class HostIngresses:
    """Parsed mergeable and canary Ingresses, until they change."""

    def __init__(self, store: Store) -> None:
        self._store = store
        # Parsed mergeable Ingresses (None: not mergeable, or invalid).
        self._mergeable: dict[_Key, Ingress | None] = {}
        # Parsed canary Ingresses, once read (None: not read yet), and the
        # Ingresses changed since, parsed again at the next read.
        self._canaries: dict[_Key, Ingress] | None = None
        self._canaries_changed: set[_Key] = set()

    def mergeable(self, host: str) -> list[Ingress]:
        """The valid master and minion Ingresses whose host is ``host``. Every
        Ingress is looked at (NIC indexes minions by host; a master's or
        minion's change is what translates this reader again)."""
        found = []
        for ref in self._store.refs("Ingress"):
            key = (ref.namespace, ref.name)
            if key not in self._mergeable:
                self._mergeable[key] = _parse_mergeable(self._store.get("Ingress", *key))
            ing = self._mergeable[key]
            if ing is not None and ing.rules and ing.rules[0].host == host:
                found.append(ing)
        return found

    def canaries(self, host: str) -> list[Ingress]:
        """The valid canary Ingresses with a rule for ``host``. Every Ingress is
        looked at once; then only those changed (``forget``)."""
        if self._canaries is None:
            self._canaries = {}
            self._canaries_changed = {(r.namespace, r.name) for r in self._store.refs("Ingress")}
        for key in self._canaries_changed:
            ing = _parse_canary(self._store.get("Ingress", *key))
            if ing is None:
                self._canaries.pop(key, None)
            else:
                self._canaries[key] = ing
        self._canaries_changed = set()
        return [c for c in self._canaries.values() if any(r.host == host for r in c.rules)]

    def forget(self, ref: ObjectRef) -> None:
        if ref.kind != "Ingress":
            return
        key = (ref.namespace, ref.name)
        self._mergeable.pop(key, None)
        if self._canaries is not None:
            self._canaries_changed.add(key)


def canaries(reads: Reads, host: str) -> list[Ingress]:
    """The valid canary Ingresses with a rule for ``host`` (any class: the
    caller keeps those it serves); a change to one translates the reader again."""
    reads.depend(ObjectRef(CANARY_HOST, "", host))
    return reads.derived(HostIngresses).canaries(host)


def mergeable(reads: Reads, host: str) -> list[Ingress]:
    """The valid master and minion Ingresses of ``host`` (any class: the
    caller keeps those it serves); a change to one translates the reader again."""
    reads.depend(ObjectRef(MERGEABLE_HOST, "", host))
    return reads.derived(HostIngresses).mergeable(host)


def _annotations(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    md = obj.get("metadata") if obj is not None else None
    annotations = md.get("annotations") if isinstance(md, Mapping) else None
    return annotations if isinstance(annotations, Mapping) else {}


def _parsed(obj: Mapping[str, Any]) -> Ingress | None:
    try:
        return parse_ingress(obj)
    except InvalidResource:
        return None


def _parse_canary(obj: Mapping[str, Any] | None) -> Ingress | None:
    flag = _annotations(obj).get(CANARY)
    if obj is None or not isinstance(flag, str) or flag.strip().lower() != "true":
        return None
    return _parsed(obj)


def _parse_mergeable(obj: Mapping[str, Any] | None) -> Ingress | None:
    if obj is None or MERGEABLE not in _annotations(obj):
        return None
    return _parsed(obj)
