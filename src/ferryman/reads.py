"""The objects a translator reads, recorded for the dependency index.

The controller hands a translator one ``Reads`` per resource it translates;
whatever the translator asks for is fetched (from the store, through the
caches here) and remembered in ``refs``, which the controller declares in
``dependencies.Dependencies``. So no translator keeps a list of what it refers
to beside the code that refers to it: a reference cannot be read and not
tracked.

``Cache`` holds what is costly to derive from an object (a Secret's checked
certificate, a VirtualServerRoute's parse) until that object changes or nothing
reads it any more.
"""

from __future__ import annotations

from collections.abc import Mapping

from ferryman.configs.ingress import SecretState
from ferryman.dependencies import ANY
from ferryman.resources.meta import ObjectRef
from ferryman.resources.nic_fields import Parsed
from ferryman.resources.virtualserverroute import VirtualServerRoute, parse_virtual_server_route
from ferryman.secrets import SecretStore
from ferryman.store import Store

# The kinds only read by translators: a change to one translates its readers.
REFERENCED = frozenset(["Secret", "VirtualServerRoute"])
_ROUTE = "VirtualServerRoute"


class Cache:
    def __init__(self, store: Store, secrets: SecretStore) -> None:
        self._store = store
        self._secrets = secrets
        self._secret_states: dict[tuple[str, str], SecretState] = {}
        self._routes: dict[tuple[str, str], Parsed[VirtualServerRoute] | None] = {}

    def secret(self, namespace: str, name: str) -> SecretState:
        key = (namespace, name)
        state = self._secret_states.get(key)
        if state is None:
            state = self._secrets.update(namespace, name, self._store.get("Secret", *key))
            self._secret_states[key] = state
        return state

    def route(self, namespace: str, name: str) -> Parsed[VirtualServerRoute] | None:
        """VirtualServerRoute namespace/name parsed (None: absent); several
        VirtualServers and its own status read one parse."""
        key = (namespace, name)
        if key not in self._routes:
            obj = self._store.get(_ROUTE, namespace, name)
            self._routes[key] = None if obj is None else parse_virtual_server_route(obj)
        return self._routes[key]

    def route_refs(self) -> list[ObjectRef]:
        return sorted(self._store.refs(_ROUTE))

    def refuse(self, ref: ObjectRef, why: str) -> None:
        """The data plane refused what ``ref`` holds: unusable until it changes."""
        if ref.kind == "Secret":
            self._secret_states[(ref.namespace, ref.name)] = SecretState(None, why)

    def forget(self, ref: ObjectRef) -> None:
        """``ref`` changed, or no resource reads it any more."""
        if ref.kind == "Secret":
            self._secret_states.pop((ref.namespace, ref.name), None)
        elif ref.kind == _ROUTE:
            self._routes.pop((ref.namespace, ref.name), None)


class Reads:
    """One translation's reads: each is recorded in ``refs``."""

    def __init__(self, cache: Cache) -> None:
        self._cache = cache
        self.refs: set[ObjectRef] = set()

    def secret(self, namespace: str, name: str) -> SecretState:
        self.refs.add(ObjectRef("Secret", namespace, name))
        return self._cache.secret(namespace, name)

    def route(self, namespace: str, name: str) -> Parsed[VirtualServerRoute] | None:
        """VirtualServerRoute namespace/name (None: absent); its change translates
        the reader again, as does its creation when it was absent."""
        self.refs.add(ObjectRef(_ROUTE, namespace, name))
        return self._cache.route(namespace, name)

    def selected_routes(self, labels: Mapping[str, str]) -> list[VirtualServerRoute]:
        """The valid VirtualServerRoutes of every namespace whose labels include
        ``labels`` (NIC's routeSelector reads all it watches), by namespace/name;
        any VirtualServerRoute's change translates the reader again."""
        self.refs.add(ObjectRef(_ROUTE, ANY, ANY))
        found = []
        for ref in self._cache.route_refs():
            parsed = self._cache.route(ref.namespace, ref.name)
            vsr = parsed.resource if parsed else None
            if vsr is not None and all(vsr.meta.labels.get(k) == v for k, v in labels.items()):
                found.append(vsr)
        return found
