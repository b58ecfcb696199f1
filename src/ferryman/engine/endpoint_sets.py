"""The endpoint sets the served Ingresses use: which Ingress uses which backend,
which backends each Service feeds, and each backend's record of peers.

A backend key ("namespace/service:port") is computed when its first user
arrives and dropped with its last; a Service's change recomputes the keys it
feeds. The records go into the controller's desired records (``(Record.ENDPOINTS, key)``).

Readiness gates (``gate_class`` set, ``--readiness-gates``): a ``ready: false``,
not terminating endpoint whose pod is Ready in all but ferryman's gate
(``resources/pod.py``: ``routable_gated``) is a peer too, when the pod's
namespace opts in and the Service selects the pod. Endpoints are matched to
pods by (namespace, address), not by ``targetRef`` (the store keeps only its
pod name, for the latency histogram's ``pod_name``): the address is what NGINX
connects to. Pods sharing an address (host network)
are told apart by the Service's selector. Each such address is remembered with
the backends it appeared in, so that a pod's change recomputes just those.

Machine lifecycle hooks (``track_nodes``, ``--machine-lifecycle-hooks``): each
backend remembers the Nodes its ready endpoints run on (the leader keeps a
pre-drain hook on their Machines), and endpoints on a Node whose Machine is
being deleted (``set_leaving``) leave rotation, unless no other is ready; the
addresses so taken out are what the drain waits on (``left_addresses``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping

from ferryman.configs.endpoints import (
    CLUSTER_IP,
    Peer,
    cluster_ip_peers,
    port_ref_of,
    resolve_peers,
)
from ferryman.configs.model import BackendKey
from ferryman.engine.store import Store
from ferryman.resources.meta import ObjectRef, valid_or_none
from ferryman.resources.pod import parse_pod, routable_gated, routable_while_gated
from ferryman.resources.readiness_gate import opted_in, selects
from ferryman.resources.service import (
    EndpointSlice,
    Service,
    parse_endpoint_slice,
    parse_service,
)
from ferryman.wire.records import Record, RecordKey

# A pod as the gate flipper names it: (namespace, name, uid).
PodId = tuple[str, str, str]


class EndpointSets:
    def __init__(
        self,
        store: Store,
        records: MutableMapping[RecordKey, str],
        gate_class: str | None = None,
        track_nodes: bool = False,
        track_pods: bool = False,
    ) -> None:
        """``records``: the desired records, where each backend's peers are written;
        ``gate_class``: the Ingress class whose readiness gate pods may wait on
        (None: readiness gates are off, ``ready: false`` is never routed to);
        ``track_nodes``: remember the Nodes of each backend's endpoints (machine
        lifecycle hooks; off, it costs nothing); ``track_pods``: remember the
        pod name of each backend's peer addresses (the latency histogram's
        ``pod_name``; off, it costs nothing)."""
        self._store = store
        self._records = records
        self._gate_class = gate_class
        self._track_nodes = track_nodes
        self._track_pods = track_pods
        # Backend -> its peers' addresses -> their pods' names (track_pods).
        self._key_pods: dict[BackendKey, dict[str, str]] = {}
        self._leaving: frozenset[str] = frozenset()
        # Backend -> the Nodes of its routable endpoints, and the reverse.
        self._key_nodes: dict[BackendKey, frozenset[str]] = {}
        self._node_keys: dict[str, set[BackendKey]] = {}
        # Backend -> (Node, address) of endpoints taken out because their Node is leaving.
        self._key_left: dict[BackendKey, frozenset[tuple[str, str]]] = {}
        self._backends: dict[ObjectRef, frozenset[BackendKey]] = {}
        self._users: dict[BackendKey, set[ObjectRef]] = {}
        self._service_keys: dict[tuple[str, str], set[BackendKey]] = {}
        # (namespace, address) of not-ready, not-terminating endpoints -> the
        # backends they appeared in; and each backend's such addresses.
        self._unready: dict[tuple[str, str], set[BackendKey]] = {}
        self._key_unready: dict[BackendKey, set[tuple[str, str]]] = {}
        # Backend -> its peers ("address#port") behind which gate-pending pods wait.
        self._pending: dict[BackendKey, dict[str, frozenset[PodId]]] = {}
        # Backend -> its namespace, while a not-ready endpoint of it is routed for
        # its pod's gate (pending, or passed and the EndpointSlice not caught up).
        self._gate_routed: dict[BackendKey, str] = {}
        # The backends computed since the store last changed (``_clean_at``: its
        # change count then): one store change queues both an Ingress, whose sync
        # computes its new backends, and their Services, whose sync would compute
        # them again from the same objects (at start-up, every one twice).
        self._clean: set[BackendKey] = set()
        self._clean_at = -1

    def pod_of(self, key: BackendKey, address: str) -> str:
        """The name of the pod at ``address`` among ``key``'s peers ("": not
        known, or not tracked)."""
        return self._key_pods.get(key, {}).get(address, "")

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
        self._records.pop((Record.ENDPOINTS, key), None)
        self._set_unready(key, set())
        self._set_nodes(key, frozenset())
        self._key_left.pop(key, None)
        self._key_pods.pop(key, None)
        self._pending.pop(key, None)
        self._gate_routed.pop(key, None)
        self._clean.discard(key)

    def compute(self, key: BackendKey) -> None:
        """Write ``key``'s record of peers from the store (none: no record);
        nothing to do when it was computed since the store last changed."""
        if self._clean_at != self._store.changes:
            self._clean.clear()
            self._clean_at = self._store.changes
        elif key in self._clean:
            return
        self._gate_routed.pop(key, None)
        ns, svc, port = split(key)
        service = valid_or_none(parse_service, self._store.get("Service", ns, svc))
        if port.endswith(CLUSTER_IP):
            # nginx.org/use-cluster-ip: the ClusterIP alone, kube-proxy balances.
            self._write(key, cluster_ip_peers(service, port_ref_of(port.removesuffix(CLUSTER_IP))))
            return
        slices = [
            s
            for raw in self._store.slices_for(ns, svc)
            if (s := valid_or_none(parse_endpoint_slice, raw)) is not None
        ]
        routable: dict[str, frozenset[PodId]] = {}
        if self._gate_class is not None:
            unready = {
                a
                for s in slices
                for e in s.endpoints
                if not e.ready and not e.terminating
                for a in e.addresses
            }
            self._set_unready(key, {(ns, a) for a in unready})
            if service is not None and unready and self._opted_in(ns):
                routable = self._gated(service, unready)
            if routable:
                self._gate_routed[key] = ns
        peers = resolve_peers(service, slices, port_ref_of(port), routable, self._leaving)
        if self._track_nodes:
            self._follow_nodes(key, slices, routable, peers)
        if self._track_pods:
            addresses = {p.address for p in peers}
            pods = {
                a: e.pod_name
                for s in slices
                for e in s.endpoints
                if e.pod_name
                for a in e.addresses
                if a in addresses
            }
            if pods:
                self._key_pods[key] = pods
            else:
                self._key_pods.pop(key, None)
        pending = {_peer(p): routable[p.address] for p in peers if routable.get(p.address)}
        if pending:
            self._pending[key] = pending
        else:
            self._pending.pop(key, None)
        self._write(key, peers)

    def _write(self, key: BackendKey, peers: tuple[Peer, ...]) -> None:
        if peers:
            self._records[(Record.ENDPOINTS, key)] = " ".join(_peer(p) for p in peers)
        else:
            self._records.pop((Record.ENDPOINTS, key), None)
        self._clean.add(key)

    # ---- machine lifecycle hooks ---------------------------------------------------

    def set_leaving(self, nodes: frozenset[str]) -> list[BackendKey]:
        """Nodes whose Machine is being deleted from now on; returns the backends
        to recompute (those with endpoints on a Node that joined or left the set)."""
        changed = nodes ^ self._leaving
        self._leaving = nodes
        keys = sorted({k for node in changed for k in self._node_keys.get(node, ())})
        self._clean.difference_update(keys)
        return keys

    @property
    def leaving(self) -> frozenset[str]:
        return self._leaving

    def nodes_in_use(self) -> frozenset[str]:
        """The Nodes running routable endpoints of some served backend."""
        return frozenset(self._node_keys)

    def left_addresses(self, node: str) -> frozenset[str]:
        """Addresses on ``node`` that some backend took out of rotation (it is leaving)."""
        return frozenset(a for left in self._key_left.values() for n, a in left if n == node)

    def _follow_nodes(
        self,
        key: BackendKey,
        slices: list[EndpointSlice],
        routable: Mapping[str, object],
        peers: tuple[Peer, ...],
    ) -> None:
        in_use = {p.address for p in peers}
        nodes: set[str] = set()
        left: set[tuple[str, str]] = set()
        for s in slices:
            for e in s.endpoints:
                if e.terminating or not e.node_name:
                    continue
                if e.ready or any(a in routable for a in e.addresses):
                    nodes.add(e.node_name)
                    if e.node_name in self._leaving:
                        left.update((e.node_name, a) for a in e.addresses if a not in in_use)
        self._set_nodes(key, frozenset(nodes))
        if left:
            self._key_left[key] = frozenset(left)
        else:
            self._key_left.pop(key, None)

    def _set_nodes(self, key: BackendKey, nodes: frozenset[str]) -> None:
        old = self._key_nodes.pop(key, frozenset())
        if nodes:
            self._key_nodes[key] = nodes
        for node in old - nodes:
            keys = self._node_keys.get(node, set())
            keys.discard(key)
            if not keys:
                self._node_keys.pop(node, None)
        for node in nodes - old:
            self._node_keys.setdefault(node, set()).add(key)

    # ---- readiness gates -----------------------------------------------------------

    def keys_at(self, namespace: str, address: str) -> list[BackendKey]:
        """The backends where a not-ready endpoint holds ``address``: a change of
        the pod there may route to it, or stop routing to it."""
        return sorted(self._unready.get((namespace, address), ()))

    def gate_routed_namespaces(self) -> frozenset[str]:
        """Namespaces where some not-ready endpoint is routed for its pod's gate:
        one that opted out keeps its pods watched until none is (sources/pods.py),
        or the endpoint of a pod that just passed its gate would go unrouted
        until its EndpointSlice says ready."""
        return frozenset(self._gate_routed.values())

    def keys_in(self, namespace: str) -> list[BackendKey]:
        """The backends with not-ready endpoints in ``namespace`` (it opted in or out)."""
        return sorted(
            {k for (ns, _), keys in self._unready.items() if ns == namespace for k in keys}
        )

    def confirmed_pending(self, held: Callable[[RecordKey], str | None]) -> frozenset[PodId]:
        """The pods whose gate is pending behind a peer of an endpoint set that
        ``held`` (what NGINX confirmed holding) contains."""
        pods: set[PodId] = set()
        for key, peers in self._pending.items():
            record = held((Record.ENDPOINTS, key))
            if record:
                in_force = set(record.split(" "))
                pods.update(p for peer, ids in peers.items() if peer in in_force for p in ids)
        return frozenset(pods)

    def _opted_in(self, namespace: str) -> bool:
        ns = self._store.get("Namespace", "", namespace)
        labels = (ns.get("metadata") or {}).get("labels") if ns else None
        return opted_in(labels if isinstance(labels, dict) else None)

    def _gated(self, service: Service, addresses: set[str]) -> dict[str, frozenset[PodId]]:
        """Of ``addresses``, those with a pod ``service`` selects that is ready in all
        but ferryman's gate -> the pods among them whose gate is still pending."""
        assert self._gate_class is not None
        cls = self._gate_class
        out: dict[str, frozenset[PodId]] = {}
        for address in addresses:
            pods = [
                p
                for raw in self._store.pods_at(service.namespace, address)
                if (p := valid_or_none(parse_pod, raw)) is not None and selects(service, p.labels)
            ]
            if any(routable_gated(p, cls) for p in pods):
                out[address] = frozenset(
                    (p.namespace, p.name, p.uid) for p in pods if routable_while_gated(p, cls)
                )
        return out

    def _set_unready(self, key: BackendKey, addresses: set[tuple[str, str]]) -> None:
        old = self._key_unready.pop(key, set())
        if addresses:
            self._key_unready[key] = addresses
        for at in old - addresses:
            keys = self._unready.get(at, set())
            keys.discard(key)
            if not keys:
                self._unready.pop(at, None)
        for at in addresses - old:
            self._unready.setdefault(at, set()).add(key)


def _peer(p: Peer) -> str:
    """A peer as the endpoint set's record writes it."""
    return f"{p.address}#{p.port}"


def split(key: BackendKey) -> tuple[str, str, str]:
    """(namespace, service, port) of a backend key."""
    ns, _, rest = key.partition("/")
    svc, _, port = rest.partition(":")
    return ns, svc, port
