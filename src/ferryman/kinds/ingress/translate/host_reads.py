"""The Ingresses one host's translation reads besides its own: the masters and
minions of a mergeable host, and the ingress-nginx canaries of a host.

Both are found by host across every Ingress, so a reader depends on a key of
the host (``MERGEABLE_HOST``/``CANARY_HOST``), and the Ingress translator marks
that key's readers stale when an Ingress of the host changes. The parses are
kept here (``HostIngresses``, one per engine cache) until their Ingress changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
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


class _ByHost:
    """The Ingresses of one sort (parsed by ``parse``, None: not of the sort)
    by host: every Ingress is read once, then only those changed since
    (``forget``). Looking a host up costs its own Ingresses, not all of them:
    each Ingress's translation looks up its hosts, so a scan of every Ingress
    per lookup made a start with many mergeable or canary Ingresses quadratic."""

    def __init__(
        self,
        store: Store,
        parse: Callable[[Mapping[str, Any] | None], Ingress | None],
        hosts_of: Callable[[Ingress], Iterable[str]],
    ) -> None:
        self._store = store
        self._parse = parse
        self._hosts_of = hosts_of
        self._parsed: dict[_Key, Ingress] = {}
        self._by_host: dict[str, dict[_Key, None]] = {}  # a dict: the order they came in
        # Keys to read again (a dict: once each, in order); None: nothing read yet.
        self._changed: dict[_Key, None] | None = None

    def of(self, host: str) -> list[Ingress]:
        if self._changed is None:
            self._changed = {(r.namespace, r.name): None for r in self._store.refs("Ingress")}
        for key in self._changed:
            self._read(key)
        self._changed = {}
        return [self._parsed[k] for k in self._by_host.get(host, ())]

    def forget(self, key: _Key) -> None:
        if self._changed is not None:
            self._changed[key] = None

    def _read(self, key: _Key) -> None:
        old = self._parsed.pop(key, None)
        if old is not None:
            for host in self._hosts_of(old):
                keys = self._by_host.get(host, {})
                keys.pop(key, None)
                if not keys:
                    self._by_host.pop(host, None)
        ing = self._parse(self._store.get("Ingress", *key))
        if ing is not None:
            self._parsed[key] = ing
            for host in self._hosts_of(ing):
                self._by_host.setdefault(host, {})[key] = None


class HostIngresses:
    """Parsed mergeable and canary Ingresses by host, until they change."""

    def __init__(self, store: Store) -> None:
        self._mergeable = _ByHost(store, _parse_mergeable, _first_host)
        self._canaries = _ByHost(store, _parse_canary, _rule_hosts)

    def mergeable(self, host: str) -> list[Ingress]:
        """The valid master and minion Ingresses whose (first rule's) host is
        ``host`` (NIC indexes minions by host; a master's or minion's change
        is what translates this reader again)."""
        return self._mergeable.of(host)

    def canaries(self, host: str) -> list[Ingress]:
        """The valid canary Ingresses with a rule for ``host``."""
        return self._canaries.of(host)

    def forget(self, ref: ObjectRef) -> None:
        if ref.kind != "Ingress":
            return
        key = (ref.namespace, ref.name)
        self._mergeable.forget(key)
        self._canaries.forget(key)


def _first_host(ing: Ingress) -> tuple[str, ...]:
    return (ing.rules[0].host,) if ing.rules else ()


def _rule_hosts(ing: Ingress) -> set[str]:
    return {r.host for r in ing.rules}


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
