"""VirtualServerRoutes as a VirtualServer's translation reads them: one parse
per route, shared by every VirtualServer that delegates to it and by its own
status (``ParsedRoutes``, one per engine cache, until the route changes), each
read recorded so the route's change translates its readers again."""

from __future__ import annotations

from collections.abc import Mapping

from ferryman.engine.dependencies import ANY
from ferryman.engine.reads import Reads
from ferryman.engine.store import Store
from ferryman.kinds.virtualserver.parse.virtualserverroute import (
    VirtualServerRoute,
    parse_virtual_server_route,
)
from ferryman.resources.meta import ObjectRef
from ferryman.resources.nic_fields import Parsed

KIND = "VirtualServerRoute"


class ParsedRoutes:
    """VirtualServerRoutes parsed (None: absent), until they change."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._routes: dict[tuple[str, str], Parsed[VirtualServerRoute] | None] = {}

    def route(self, namespace: str, name: str) -> Parsed[VirtualServerRoute] | None:
        key = (namespace, name)
        if key not in self._routes:
            obj = self._store.get(KIND, namespace, name)
            self._routes[key] = None if obj is None else parse_virtual_server_route(obj)
        return self._routes[key]

    def refs(self) -> list[ObjectRef]:
        return sorted(self._store.refs(KIND))

    def forget(self, ref: ObjectRef) -> None:
        if ref.kind == KIND:
            self._routes.pop((ref.namespace, ref.name), None)


class RoutesRead:
    """``delegation.RouteReads`` over one translation's ``Reads``."""

    def __init__(self, reads: Reads) -> None:
        self._reads = reads
        self._routes = reads.derived(ParsedRoutes)

    def route(self, namespace: str, name: str) -> Parsed[VirtualServerRoute] | None:
        """VirtualServerRoute namespace/name (None: absent); its change translates
        the reader again, as does its creation when it was absent."""
        self._reads.depend(ObjectRef(KIND, namespace, name))
        return self._routes.route(namespace, name)

    def selected_routes(self, labels: Mapping[str, str]) -> list[VirtualServerRoute]:
        """The valid VirtualServerRoutes of every namespace whose labels include
        ``labels`` (NIC's routeSelector reads all it watches), by namespace/name;
        any VirtualServerRoute's change translates the reader again."""
        self._reads.depend(ObjectRef(KIND, ANY, ANY))
        found = []
        for ref in self._routes.refs():
            parsed = self._routes.route(ref.namespace, ref.name)
            vsr = parsed.resource if parsed else None
            if vsr is not None and all(vsr.meta.labels.get(k) == v for k, v in labels.items()):
                found.append(vsr)
        return found
