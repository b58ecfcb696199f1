"""The endpoint sets the served Ingresses use: which Ingress uses which backend,
which backends each Service feeds, and each backend's record of peers.

A backend key ("namespace/service:port") is computed when its first user
arrives and dropped with its last; a Service's change recomputes the keys it
feeds. The records go into the controller's desired records (``("E", key)``).
"""

from __future__ import annotations

from collections.abc import MutableMapping

from ferryman.configs.endpoints import port_ref_of, resolve_peers
from ferryman.configs.model import BackendKey
from ferryman.dataplane import RecordKey
from ferryman.resources.meta import ObjectRef, valid_or_none
from ferryman.resources.service import parse_endpoint_slice, parse_service
from ferryman.store import Store


class EndpointSets:
    def __init__(self, store: Store, records: MutableMapping[RecordKey, str]) -> None:
        """``records``: the desired records, where each backend's peers are written."""
        self._store = store
        self._records = records
        self._backends: dict[ObjectRef, frozenset[BackendKey]] = {}
        self._users: dict[BackendKey, set[ObjectRef]] = {}
        self._service_keys: dict[tuple[str, str], set[BackendKey]] = {}

    def backends_of(self, ref: ObjectRef) -> frozenset[BackendKey]:
        return self._backends.get(ref, frozenset())

    def users(self, key: BackendKey) -> frozenset[ObjectRef]:
        """The Ingresses routing to ``key``."""
        return frozenset(self._users.get(key, ()))

    def keys_of(self, namespace: str, service: str) -> list[BackendKey]:
        """The backend keys ``service`` feeds, in order."""
        return sorted(self._service_keys.get((namespace, service), ()))

    def served_services(self, namespace: str) -> frozenset[str]:
        """Names of the Services in ``namespace`` that a served Ingress routes to
        (readiness gates: which pods a gate is for)."""
        return frozenset(svc for ns, svc in self._service_keys if ns == namespace)

    def set_backends(self, ref: ObjectRef, backends: frozenset[BackendKey]) -> None:
        """``ref`` now routes to ``backends``: new keys are computed, unused ones dropped."""
        old = self._backends.get(ref, frozenset())
        if backends:
            self._backends[ref] = backends
        else:
            self._backends.pop(ref, None)
        for key in backends - old:
            users = self._users.setdefault(key, set())
            if not users:
                ns, svc, _ = split(key)
                self._service_keys.setdefault((ns, svc), set()).add(key)
                self.compute(key)
            users.add(ref)
        for key in old - backends:
            users = self._users.get(key, set())
            users.discard(ref)
            if not users:
                self._users.pop(key, None)
                self.drop(key)
                ns, svc, _ = split(key)
                keys = self._service_keys.get((ns, svc), set())
                keys.discard(key)
                if not keys:
                    self._service_keys.pop((ns, svc), None)

    def drop(self, key: BackendKey) -> None:
        """No record for ``key`` (its computation failed, or nobody uses it)."""
        self._records.pop(("E", key), None)

    def compute(self, key: BackendKey) -> None:
        """Write ``key``'s record of peers from the store (none: no record)."""
        ns, svc, port = split(key)
        service = valid_or_none(parse_service, self._store.get("Service", ns, svc))
        slices = [
            s
            for raw in self._store.slices_for(ns, svc)
            if (s := valid_or_none(parse_endpoint_slice, raw)) is not None
        ]
        peers = resolve_peers(service, slices, port_ref_of(port))
        if peers:
            self._records[("E", key)] = " ".join(f"{p.address}#{p.port}" for p in peers)
        else:
            self.drop(key)


def split(key: BackendKey) -> tuple[str, str, str]:
    """(namespace, service, port) of a backend key."""
    ns, _, rest = key.partition("/")
    svc, _, port = rest.partition(":")
    return ns, svc, port
