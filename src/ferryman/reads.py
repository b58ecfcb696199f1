"""The objects a translator reads, recorded for the dependency index.

The controller hands a translator one ``Reads`` per resource it translates;
whatever the translator asks for is fetched (from the store, through the
caches here) and remembered in ``refs``, which the controller declares in
``dependencies.Dependencies``. So no translator keeps a list of what it refers
to beside the code that refers to it: a reference cannot be read and not
tracked.

``Cache`` holds what is costly to derive from an object (a Secret's checked
certificate) until that object changes or nothing reads it any more.
"""

from __future__ import annotations

from ferryman.configs.ingress import SecretState
from ferryman.resources.meta import ObjectRef
from ferryman.secrets import SecretStore
from ferryman.store import Store

# The kinds only read by translators: a change to one translates its readers.
REFERENCED = frozenset(["Secret"])


class Cache:
    def __init__(self, store: Store, secrets: SecretStore) -> None:
        self._store = store
        self._secrets = secrets
        self._secret_states: dict[tuple[str, str], SecretState] = {}

    def secret(self, namespace: str, name: str) -> SecretState:
        key = (namespace, name)
        state = self._secret_states.get(key)
        if state is None:
            state = self._secrets.update(namespace, name, self._store.get("Secret", *key))
            self._secret_states[key] = state
        return state

    def refuse(self, ref: ObjectRef, why: str) -> None:
        """The data plane refused what ``ref`` holds: unusable until it changes."""
        if ref.kind == "Secret":
            self._secret_states[(ref.namespace, ref.name)] = SecretState(None, why)

    def forget(self, ref: ObjectRef) -> None:
        """``ref`` changed, or no resource reads it any more."""
        if ref.kind == "Secret":
            self._secret_states.pop((ref.namespace, ref.name), None)


class Reads:
    """One translation's reads: each is recorded in ``refs``."""

    def __init__(self, cache: Cache) -> None:
        self._cache = cache
        self.refs: set[ObjectRef] = set()

    def secret(self, namespace: str, name: str) -> SecretState:
        self.refs.add(ObjectRef("Secret", namespace, name))
        return self._cache.secret(namespace, name)
