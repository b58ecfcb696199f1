"""VirtualServerRoute status and Events, as NIC reports them.

A VirtualServerRoute has no host of its own: what it says depends on the
VirtualServer owning its host. NIC (internal/k8s/controller.go,
``updateVirtualServerStatusAndEvents``; configuration.go,
``addProblemsForOrphanOrIgnoredVsrs``):

- served by a VirtualServer: ``Valid``/``AddedOrUpdated`` "Configuration for
  ns/name was added or updated" (``Warning``/``AddedOrUpdatedWithWarning`` "...
  with warning(s): ..." when part of it is not applied), ``referencedBy`` that
  VirtualServer; said again each time the VirtualServer is;
- invalid on its own: ``Invalid``/``Rejected`` "VirtualServerRoute ns/name was
  rejected with error: ...";
- valid but served by none: ``Warning``/``Ignored`` "VirtualServer ns/name
  ignores VirtualServerRoute" when a VirtualServer owns its host, else
  ``Warning``/``NoVirtualServerFound`` "VirtualServer is invalid or doesn't
  exist"; ``referencedBy`` empty;
- in tenant mode, of a namespace not allowed its host (``configs/tenancy.py``):
  ``Invalid``/``Rejected``, saying so (ferryman's; NIC has no host policy).

The controller tells ``served`` what each VirtualServer's translation serves
(``VSRecords.routes``) and ``changed`` when a VirtualServerRoute changes; this
module keeps which VirtualServerRoutes wait for a VirtualServer at which host, so
a VirtualServer taking or leaving a host updates them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from ferryman.configs.tenancy import host_denied
from ferryman.engine.reads import Cache
from ferryman.kinds.virtualserver.translate.route_reads import ParsedRoutes
from ferryman.report import (
    ADDED_OR_UPDATED,
    ADDED_OR_UPDATED_WITH_WARNING,
    INVALID,
    REJECTED,
    VALID,
    WARNING_STATE,
)
from ferryman.resources.meta import ObjectRef

IGNORED, NO_VIRTUAL_SERVER = "Ignored", "NoVirtualServerFound"  # NIC's reasons

# (the VirtualServerRoute, state, reason, message, referencedBy)
Emit = Callable[[ObjectRef, str, str, str, str], None]


class RouteStatuses:
    def __init__(
        self,
        cache: Cache,
        served_class: Callable[[], str],
        host_owner: Callable[[str], ObjectRef | None],
        emit: Emit,
        allows: Callable[[str, str], bool] = lambda namespace, host: True,
    ) -> None:
        """``allows``: whether a namespace may serve a host (tenant mode)."""
        self._allows = allows
        self._cache = cache
        self._served_class = served_class
        self._host_owner = host_owner
        self._emit = emit
        # Served VirtualServerRoutes: by whom, with which warnings.
        self._serving: dict[ObjectRef, tuple[ObjectRef, tuple[str, ...]]] = {}
        self._of_vs: dict[ObjectRef, frozenset[ObjectRef]] = {}
        self._vs_host: dict[ObjectRef, str] = {}
        # Valid VirtualServerRoutes served by none, by their host.
        self._waiting: dict[str, set[ObjectRef]] = {}
        self._waiting_host: dict[ObjectRef, str] = {}

    def served(
        self, vs: ObjectRef, host: str | None, routes: Mapping[ObjectRef, tuple[str, ...]]
    ) -> None:
        """VirtualServer ``vs`` (at ``host``; None: deleted or rejected) now serves
        exactly ``routes``, each with its warnings."""
        old = self._of_vs.pop(vs, frozenset())
        if routes:
            self._of_vs[vs] = frozenset(routes)
        for ref, warnings in routes.items():
            self._serving[ref] = (vs, warnings)
            self._unwait(ref)
            self._report_served(ref)
        for ref in sorted(old - set(routes)):
            if self._serving.get(ref, (None, ()))[0] == vs:
                del self._serving[ref]
                self.changed(ref)
        # Who owns its host, before and now, may have changed.
        hosts = {self._vs_host.pop(vs, None), host} - {None}
        if host is not None:
            self._vs_host[vs] = host
        for at in sorted(h for h in hosts if h is not None):
            for ref in sorted(self._waiting.get(at, set()) - set(routes)):
                self.changed(ref)

    def changed(self, ref: ObjectRef) -> None:
        """VirtualServerRoute ``ref`` changed (or its VirtualServer let it go)."""
        self._unwait(ref)
        parsed = self._cache.derived(ParsedRoutes).route(ref.namespace, ref.name)
        if parsed is None:  # deleted: nothing to report on
            self._serving.pop(ref, None)
            return
        who = f"{ref.namespace}/{ref.name}"
        vsr = parsed.resource
        if vsr is None:
            message = f"VirtualServerRoute {who} was rejected with error: {parsed.message()}"
            self._emit(ref, INVALID, REJECTED, message, "")
            return
        if vsr.ingress_class not in ("", self._served_class()):
            return  # another controller's
        if ref in self._serving:
            self._report_served(ref)
            return
        if not self._allows(ref.namespace, vsr.host):
            why = host_denied(ref.namespace, vsr.host)
            message = f"VirtualServerRoute {who} was rejected with error: {why}"
            self._emit(ref, INVALID, REJECTED, message, "")
            return
        self._waiting_host[ref] = vsr.host
        self._waiting.setdefault(vsr.host, set()).add(ref)
        owner = self._host_owner(vsr.host)
        if owner is not None and owner.kind == "VirtualServer":
            message = f"VirtualServer {owner.namespace}/{owner.name} ignores VirtualServerRoute"
            self._emit(ref, WARNING_STATE, IGNORED, message, "")
        else:
            message = "VirtualServer is invalid or doesn't exist"
            self._emit(ref, WARNING_STATE, NO_VIRTUAL_SERVER, message, "")

    def count(self) -> int:
        """VirtualServerRoutes served (NIC's metric counts those its VirtualServers hold)."""
        return len(self._serving)

    def serving(self, virtual_servers: Iterable[ObjectRef]) -> set[ObjectRef]:
        """The VirtualServerRoutes these VirtualServers serve."""
        return {ref for vs in virtual_servers for ref in self._of_vs.get(vs, ())}

    def _report_served(self, ref: ObjectRef) -> None:
        vs, warnings = self._serving[ref]
        message = f"Configuration for {ref.namespace}/{ref.name} was added or updated"
        by = f"{vs.namespace}/{vs.name}"
        if warnings:
            message += " with warning(s): " + "; ".join(warnings)
            self._emit(ref, WARNING_STATE, ADDED_OR_UPDATED_WITH_WARNING, message, by)
        else:
            self._emit(ref, VALID, ADDED_OR_UPDATED, message, by)

    def _unwait(self, ref: ObjectRef) -> None:
        host = self._waiting_host.pop(ref, None)
        if host is not None:
            refs = self._waiting[host]
            refs.discard(ref)
            if not refs:
                del self._waiting[host]
