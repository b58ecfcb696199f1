"""Kubernetes mode: one list+watch informer per kind, through ``ferryman.kube``.

Each informer lists (the list's resourceVersion is where its watch starts),
then watches. When the watch ends for any reason — 410 Gone after compaction, a
dropped connection, an API server restart — it lists again and compares the
result with what it delivered before, so objects deleted during the gap are
deleted here too and nothing added is missed; ``resync`` ends every watch at
once, for a replica that fell behind (``engine/following.py``). Secrets are listed with a field
selector for each type ferryman reads (TLS, and those of NIC's policies).

With ``--readiness-gates`` the opted-in Namespaces are watched too (label-selected
by the API server) and, through ``sources/pods.py``, the Pods of each of them.

The registered kinds (``ferryman.kinds.REGISTRY``) these settings enable are
watched besides the engine's own inputs; a custom resource's CRD may be
absent. With ``--enable-gateway-api`` that is Gateway API's kinds, which need
every Namespace too: a listener's ``allowedRoutes`` selects namespaces by
their labels. With readiness gates as well, the two Namespace informers feed
one store entry per namespace (``sources/namespaces.py``).

The client (``kube/client.py``) comes configured from a kubeconfig or in-cluster
and decodes typed objects; the store keeps plain dicts (``to_dict``) so manifests mode
and Kubernetes mode feed the controller the same shape.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ferryman.engine.kind_spec import KindSpec
from ferryman.kube.errors import Forbidden, NotFound, from_api
from ferryman.kube.resources import (
    AsyncClient,
    ConfigMap,
    EndpointSlice,
    Namespace,
    Pod,
    Secret,
    Service,
    resource_for,
)
from ferryman.kube.watch import Backoff, Listing, Query, informer
from ferryman.resources.meta import ObjectRef, ref_of
from ferryman.resources.readiness_gate import INJECT_ENABLED, INJECT_LABEL
from ferryman.resources.secret_policy import SECRET_TYPES
from ferryman.sources import Sink
from ferryman.sources.namespaces import NamespaceMerge
from ferryman.sources.pods import PodInformers

log = logging.getLogger("ferryman.kubernetes")

# Objects per list request (limit/continue), as client-go's informers page:
# one unpaged list of 20,000 EndpointSlices is tens of MB of JSON decoded at
# once, and the heap it grows to stays the process's.
LIST_CHUNK = 500
# Backoff between relists after an error: quick first, capped.
_RETRY_MIN = 0.2
_RETRY_MAX = 10.0
# How often a kind RBAC lets ferryman list but not watch is listed again (NIC's
# ClusterRole grants IngressClasses get and list only): class changes are rare,
# and a list per half minute costs the API server next to nothing.
_POLL = 30.0


@dataclass(frozen=True)
class Kind:
    name: str
    resource: Any
    namespaced: bool = True
    fields: Mapping[str, str] | None = None
    labels: Mapping[str, str] | None = None
    # A custom resource whose CRD may not be installed: while the API server
    # answers 404 for it, it counts as listed and empty (and is asked again).
    optional: bool = False
    # What of each object is handed on (None: all of it).
    project: Callable[[dict[str, Any]], dict[str, Any]] | None = field(default=None, compare=False)

    @property
    def key(self) -> str:
        """The informer's identity: one kind may have several, by field or label
        selector (Namespaces: the opted-in ones for readiness gates, all of them
        for Gateway API)."""
        key = self.name
        if self.fields:
            key += "?" + ",".join(f"{k}={v}" for k, v in sorted(self.fields.items()))
        if self.labels:
            key += "#" + ",".join(f"{k}={v}" for k, v in sorted(self.labels.items()))
        return key


def kind_of(spec: KindSpec) -> Kind:
    """The informer of a registered kind (a custom resource's CRD may be absent)."""
    return Kind(spec.kind, resource_for(spec), namespaced=spec.namespaced, optional=spec.custom)


# What is always watched besides the registered kinds: the engine's own inputs.
CORE_KINDS = (
    Kind("Service", Service),
    Kind("EndpointSlice", EndpointSlice),
    # One informer per Secret type ferryman reads (a field selector takes one value).
    *(Kind("Secret", Secret, fields={"type": t}) for t in SECRET_TYPES),
)
# Every Namespace, for a kind that ``needs`` them (Gateway API:
# allowedRoutes.namespaces.selector matches their labels).
ALL_NAMESPACES = Kind("Namespace", Namespace, namespaced=False)
# Every ConfigMap (in the watched namespaces), for a kind that ``needs`` them
# (BackendTLSPolicy's caCertificateRefs).
ALL_CONFIGMAPS = Kind("ConfigMap", ConfigMap)

# Readiness gates (--readiness-gates): only opted-in namespaces are held (the
# API server filters), and Pods only in those (sources/pods.py).
NAMESPACES = Kind("Namespace", Namespace, namespaced=False, labels={INJECT_LABEL: INJECT_ENABLED})
PODS = Kind("Pod", Pod)


def configmap_keys(specs: Iterable[KindSpec]) -> frozenset[str] | None:
    """The ``data`` keys of ConfigMaps the kinds needing every ConfigMap read
    (None: one reads them whole)."""
    keys: set[str] = set()
    for spec in specs:
        if "ConfigMap" in spec.needs:
            if not spec.configmap_keys:
                return None
            keys.update(spec.configmap_keys)
    return frozenset(keys)


def keys_only(
    keys: frozenset[str], whole: frozenset[tuple[str, str]]
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A ConfigMap with ``keys`` of its ``data`` only, unless it is one of
    ``whole`` (namespace, name): the --nginx-configmaps ConfigMaps, read key by
    key, which their own informers hand on too."""

    def project(obj: dict[str, Any]) -> dict[str, Any]:
        md = obj.get("metadata") or {}
        if (md.get("namespace", ""), md.get("name", "")) in whole:
            return obj
        out = {k: v for k, v in obj.items() if k not in ("data", "binaryData")}
        data = obj.get("data")
        if isinstance(data, Mapping):
            out["data"] = {k: v for k, v in data.items() if k in keys}
        return out

    return project


def configmap_kind(name: str) -> Kind:
    """One ConfigMap by name (the API server filters): --nginx-configmaps's,
    --ingress-nginx-configmap's."""
    return Kind("ConfigMap", ConfigMap, fields={"metadata.name": name})


def _not_found(e: Exception) -> bool:
    """The API server does not serve the resource: a 404, as a Status or as the
    plain "404 page not found" an unknown API group gets."""
    return isinstance(from_api(e), NotFound)


async def _either(*events: asyncio.Event) -> None:
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()


def _plain(
    obj: Any, kind: str, project: Callable[[dict[str, Any]], dict[str, Any]] | None = None
) -> dict[str, Any]:
    data: dict[str, Any] = obj.to_dict()
    data.setdefault("kind", kind)
    return project(data) if project is not None else data


class KubernetesSource:
    def __init__(
        self,
        client: AsyncClient,
        sink: Sink,
        namespaces: tuple[str, ...] = (),
        pods_client: AsyncClient | None = None,
        ingress_class: str = "",
        configmaps: Iterable[tuple[str, str]] = (),
        kinds: Iterable[KindSpec] = (),
    ) -> None:
        """``pods_client`` (readiness gates): watch opted-in Namespaces, and through
        this client the Pods in each of them. Its own connections: a watch per
        opted-in namespace must not take those that status, Events and the Lease need.
        ``configmaps``: (namespace, name) of each ConfigMap to watch, whatever
        the watched namespaces (--nginx-configmaps, --ingress-nginx-configmap).
        ``kinds``: the registered kinds these settings enable (``KindSpec.enabled``),
        watched besides the engine's own; every Namespace too when one ``needs`` them."""
        self._client = client
        self._pods_client = pods_client
        self._sink = sink
        specs = tuple(kinds)
        configmaps = tuple(configmaps)
        all_namespaces = any("Namespace" in spec.needs for spec in specs)
        all_configmaps = ALL_CONFIGMAPS
        if (keys := configmap_keys(specs)) is not None:
            project = keys_only(keys, frozenset(configmaps))
            all_configmaps = replace(ALL_CONFIGMAPS, project=project)
        self._kinds = (
            *(kind_of(spec) for spec in specs),
            *CORE_KINDS,
            *((ALL_NAMESPACES,) if all_namespaces else ()),
            *((all_configmaps,) if any("ConfigMap" in s.needs for s in specs) else ()),
        )
        # Both Namespace informers: one store entry per namespace, merged.
        self._merge = NamespaceMerge(sink) if all_namespaces and pods_client else None
        gated_sink = self._merge.gated if self._merge is not None else sink
        self._gates = (
            PodInformers(self, PODS, gated_sink, namespaces, ingress_class) if pods_client else None
        )
        # () means every namespace: one informer per kind with namespace "*".
        self._namespaces = namespaces or ("*",)
        self._known: dict[tuple[str, str], dict[ObjectRef, str]] = {}
        self._synced: dict[tuple[str, str], asyncio.Event] = {}
        for kind in self._kinds:
            for ns in self._scopes(kind):
                self._synced[(kind.key, ns)] = asyncio.Event()
        self._configmaps = [(configmap_kind(name), ns) for ns, name in configmaps]
        # Set to end every watch at once (``resync``); a new one takes its place.
        self._resynced = asyncio.Event()
        # Since when (monotonic) each informer that cannot list has failed.
        self._failing: dict[tuple[str, str], float] = {}
        # The informers RBAC lets list but not watch (told once, then polled).
        self._polled: set[tuple[str, str]] = set()
        for cm in self._configmaps:
            self.expect(*cm)

    def opted_in(self, namespace: str) -> bool:
        """Whether ``namespace`` opted in to readiness gates (the webhook asks)."""
        return self._gates is not None and self._gates.opted_in(namespace)

    def settled(self, gate_routed: frozenset[str]) -> None:
        """After a flush (sources/pods.py, ``PodInformers.settled``)."""
        if self._gates is not None:
            self._gates.settled(gate_routed)

    def _scopes(self, kind: Kind) -> tuple[str, ...]:
        return self._namespaces if kind.namespaced else ("",)

    async def wait_synced(self) -> None:
        """Returns once every informer has delivered its first list (those that
        lists start meanwhile, the Pod informers of opted-in namespaces, too)."""
        while not all(e.is_set() for e in self._synced.values()):
            await asyncio.gather(*(e.wait() for e in list(self._synced.values())))

    async def run(self, stop: asyncio.Event) -> None:
        async with asyncio.TaskGroup() as tg:
            for kind in self._kinds:
                for ns in self._scopes(kind):
                    tg.create_task(self.informer(kind, ns, stop), name=f"watch {kind.name} {ns}")
            for kind, ns in self._configmaps:
                tg.create_task(self.informer(kind, ns, stop), name=f"watch {kind.key} {ns}")
            if self._gates is not None:
                self.expect(NAMESPACES, "")
                tg.create_task(self._gates.run(stop), name="pod informers")
                tg.create_task(self.informer(NAMESPACES, "", stop), name="watch Namespace")

    def resync(self) -> None:
        """Every informer lists again, and ``wait_synced`` waits for all of them:
        after a stall, the watches' streams may hold a part of what happened."""
        for synced in self._synced.values():
            synced.clear()
        resynced, self._resynced = self._resynced, asyncio.Event()
        resynced.set()

    def out_of_touch(self) -> float | None:
        """Since when (``time.monotonic``) some informer has been unable to list."""
        return min(self._failing.values(), default=None)

    def forget(self, kind: Kind, namespace: str) -> None:
        """Delete what the (stopped) informer of ``kind`` in ``namespace`` delivered."""
        # Set, not just dropped: wait_synced may be waiting on it.
        if (synced := self._synced.pop((kind.key, namespace), None)) is not None:
            synced.set()
        self._failing.pop((kind.key, namespace), None)
        for ref in self._known.pop((kind.key, namespace), {}):
            self._sink.delete(ref)

    def expect(self, kind: Kind, namespace: str) -> None:
        """``wait_synced`` waits for an informer about to start, too."""
        self._synced.setdefault((kind.key, namespace), asyncio.Event())

    async def informer(self, kind: Kind, namespace: str, stop: asyncio.Event) -> None:
        """List and watch ``kind`` in ``namespace`` ("" cluster-wide, "*" all) until
        ``stop``; the objects go to the sink."""
        self.expect(kind, namespace)
        query = Query(
            kind.resource,
            namespace if kind.namespaced else None,
            kind.fields,
            kind.labels,
            chunk_size=LIST_CHUNK,
        )

        # Whether this round's list succeeded: a watch refused after it means
        # RBAC grants list but not watch, and the kind is followed by listing.
        just_listed = False

        async def listed(listing: Listing) -> None:
            nonlocal just_listed
            await self._relist(kind, namespace, listing)
            just_listed = True
            self._failing.pop((kind.key, namespace), None)
            if (synced := self._synced.get((kind.key, namespace))) is not None:
                synced.set()

        async def event(kind_of_event: str, obj: Any) -> None:
            self._event(kind, namespace, kind_of_event, obj)

        def interrupted(e: Exception) -> float | None:
            nonlocal just_listed
            listed_first, just_listed = just_listed, False
            refused = from_api(e)
            # 403 only: a 401 (a token gone stale) is no RBAC rule, and fails the list next.
            if listed_first and isinstance(refused, Forbidden) and refused.status == 403:
                if (kind.key, namespace) not in self._polled:
                    self._polled.add((kind.key, namespace))
                    log.warning(
                        "RBAC grants list but not watch: listing again every "
                        f"{_POLL:g}s (grant watch to see changes at once)",
                        extra={"fields": {"kind": kind.name, "namespace": namespace}},
                    )
                return _POLL
            if kind.optional and _not_found(e):
                self._failing.pop((kind.key, namespace), None)
                # No CRD: nothing of this kind exists; start-up must not wait for it.
                self._absent(kind, namespace)
                return _RETRY_MAX / 2
            self._failing.setdefault((kind.key, namespace), time.monotonic())
            log.warning(
                "watch interrupted; listing again",
                extra={"fields": {"kind": kind.name, "namespace": namespace, "error": str(e)}},
            )
            return None

        async def pause(delay: float) -> None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(_either(stop, self._resynced), delay)

        await informer(
            self._client_of(kind),
            query,
            event,
            interrupted,
            Backoff(_RETRY_MIN, _RETRY_MAX),
            on_list=listed,
            pause=pause,
            pause_after_end=True,
            stop=stop,
            restart=lambda: self._resynced,
        )

    def _absent(self, kind: Kind, namespace: str) -> None:
        if (synced := self._synced.get((kind.key, namespace))) is not None:
            if not synced.is_set():
                log.info(
                    "resource not served by the API server (CRD not installed?); asking again",
                    extra={"fields": {"kind": kind.name}},
                )
            synced.set()
        for ref in self._known.pop((kind.key, namespace), {}):
            self._sink.delete(ref)

    def _client_of(self, kind: Kind) -> AsyncClient:
        return self._pods_client if kind is PODS and self._pods_client else self._client

    def _sink_of(self, kind: Kind) -> Sink:
        """Opted-in Namespaces and Pods go through the Pod informers, which follow
        them; all Namespaces, with those too, through the merge."""
        if kind is ALL_NAMESPACES and self._merge is not None:
            return self._merge.everything
        gated = kind is NAMESPACES or kind is PODS
        return self._gates if gated and self._gates is not None else self._sink

    async def _relist(self, kind: Kind, namespace: str, listing: Listing) -> None:
        sink = self._sink_of(kind)
        seen: dict[ObjectRef, str] = {}
        async for obj in listing:
            data = _plain(obj, kind.name, kind.project)
            ref = ref_of(data)
            if ref is None:
                continue
            version = str(data["metadata"].get("resourceVersion", ""))
            seen[ref] = version
            known = self._known.setdefault((kind.key, namespace), {})
            if known.get(ref) != version:
                sink.upsert(data)
                # Known at once, not at the list's end: a Pod informer stopped
                # half-way through its list (``forget``) deletes these too.
                known[ref] = version
        for ref in self._known.get((kind.key, namespace), {}).keys() - seen.keys():
            sink.delete(ref)
        self._known[(kind.key, namespace)] = seen

    def _event(self, kind: Kind, namespace: str, event: str, obj: Any) -> None:
        data = _plain(obj, kind.name, kind.project)
        ref = ref_of(data)
        if ref is None:
            return
        known = self._known.setdefault((kind.key, namespace), {})
        sink = self._sink_of(kind)
        if event == "DELETED":
            known.pop(ref, None)
            sink.delete(ref)
        else:
            known[ref] = str(data["metadata"].get("resourceVersion", ""))
            sink.upsert(data)
