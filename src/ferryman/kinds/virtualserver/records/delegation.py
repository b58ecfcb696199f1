"""Which VirtualServerRoutes a VirtualServer hands paths to, with NIC's rules.

A VirtualServer route with ``route: [namespace/]name`` or
``routeSelector.matchLabels`` has no location of its own: the subroutes of the
VirtualServerRoutes it delegates to take its place (``kinds/virtualserver/records/virtualserver.py``
adds them after the VirtualServer's own routes, where NIC writes their
locations, so NGINX's regex order is NIC's). Which ones, and what the
VirtualServer is told about the others, follows NIC's
``buildVirtualServerRoutes`` (internal/k8s/configuration.go):

- a named VirtualServerRoute that is absent, invalid or of another class:
  "VirtualServerRoute ns/name doesn't exist or invalid";
- one that fails the check against the VirtualServer (host, subroute paths;
  ``check_for_virtual_server``): "VirtualServerRoute ns/name is invalid: ...";
  several regex routes naming one VirtualServerRoute are checked together, after
  the others, in the order each was first named;
- a routeSelector picks the valid VirtualServerRoutes of every namespace whose
  labels match (by namespace/name: NIC iterates a Go map, whose order is random);
- a VirtualServerRoute reached twice: "VS ns/name has duplicate
  VirtualServerRoutes ns/name", the first kept;
- subroutes of two VirtualServerRoutes with one path: "path p has conflicting
  subroutes on a and b", the later one dropped. ferryman also drops one whose
  subroute has the path of one of the VirtualServer's own routes, which NGINX
  would refuse as a duplicate location (NIC's reload fails).

Each dropped VirtualServerRoute's paths answer as if the delegating route were
absent (another route, else 404), as NIC's configuration without its locations
does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from ferryman.configs.tenancy import HostRules, host_denied
from ferryman.kinds.virtualserver.parse.action import ErrorPage
from ferryman.kinds.virtualserver.parse.route import Route
from ferryman.kinds.virtualserver.parse.virtualserver import VirtualServer
from ferryman.kinds.virtualserver.parse.virtualserverroute import (
    KIND,
    VirtualServerRoute,
    check_for_virtual_server,
)
from ferryman.resources.meta import ObjectRef
from ferryman.resources.nic_fields import Parsed
from ferryman.resources.policy_ref import PolicyRef


class RouteReads(Protocol):
    """What resolving reads (``reads.Reads``, which records each read)."""

    def route(self, namespace: str, name: str) -> Parsed[VirtualServerRoute] | None: ...
    def selected_routes(self, labels: Mapping[str, str]) -> list[VirtualServerRoute]: ...


@dataclass(frozen=True)
class Delegated:
    """A VirtualServerRoute whose subroutes a VirtualServer serves."""

    vsr: VirtualServerRoute
    # NIC: a subroute without errorPages takes those of the VS route delegating
    # to it (the last such route that has some).
    error_pages: tuple[ErrorPage, ...] = ()
    # NIC: a subroute without policies takes those of the VS route delegating to
    # it; enforced where policies are (not by this module).
    policies: tuple[PolicyRef, ...] = ()

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef(KIND, self.vsr.meta.namespace, self.vsr.meta.name)

    def subroute(self, r: Route) -> Route:
        """``r`` as served: what it inherits from the delegating VS route."""
        if not r.error_pages and self.error_pages:
            return replace(r, error_pages=self.error_pages)
        return r


@dataclass(frozen=True)
class Delegations:
    routes: tuple[Delegated, ...]  # in NIC's order of their locations
    warnings: tuple[str, ...]  # the VirtualServer's, NIC's texts


def _key(vsr: VirtualServerRoute) -> str:
    return f"{vsr.meta.namespace}/{vsr.meta.name}"


def _problems(vsr: VirtualServerRoute, vs: VirtualServer, paths: tuple[str, ...]) -> str:
    return Parsed(None, tuple(check_for_virtual_server(vsr, vs.host, paths))).message()


class _Resolver:
    def __init__(
        self, vs: VirtualServer, reads: RouteReads, served_class: str, hosts: HostRules | None
    ) -> None:
        self.vs = vs
        self.hosts = hosts
        self.reads = reads
        self.served_class = served_class
        self.warnings: list[str] = []
        self.found: list[VirtualServerRoute] = []
        self.regex: dict[str, tuple[VirtualServerRoute, list[str]]] = {}
        # What each VSR's subroutes inherit: NIC keeps the last delegating VS
        # route's errorPages and policies that has any.
        self.error_pages: dict[str, tuple[ErrorPage, ...]] = {}
        self.policies: dict[str, tuple[PolicyRef, ...]] = {}

    def lookup(self, namespace: str, name: str) -> VirtualServerRoute | None:
        parsed = self.reads.route(namespace, name)
        vsr = parsed.resource if parsed else None
        if vsr is None or vsr.ingress_class not in ("", self.served_class):
            self.warnings.append(f"VirtualServerRoute {namespace}/{name} doesn't exist or invalid")
            return None
        return vsr

    def checked(self, vsr: VirtualServerRoute, paths: tuple[str, ...]) -> bool:
        message = _problems(vsr, self.vs, paths) or tenant_problem(vsr, self.vs, self.hosts)
        if message:
            self.warnings.append(f"VirtualServerRoute {_key(vsr)} is invalid: {message}")
        return not message

    def inherit(self, key: str, r: Route) -> None:
        if r.error_pages:
            self.error_pages[key] = r.error_pages
        if r.policies:
            self.policies[key] = r.policies

    def route(self, r: Route) -> None:
        path = str(r.path)
        if r.route is not None:
            vsr = self.lookup(r.route.namespace, r.route.name)
            if vsr is None:
                return
            self.inherit(_key(vsr), r)
            if r.path.modifier.startswith("~"):
                _, paths = self.regex.setdefault(_key(vsr), (vsr, []))
                if path not in paths:
                    paths.append(path)
            elif self.checked(vsr, (path,)):
                self.found.append(vsr)
            return
        for vsr in self.reads.selected_routes(dict(r.route_selector)):
            if vsr.ingress_class not in ("", self.served_class):
                continue
            self.inherit(_key(vsr), r)
            if self.checked(vsr, (path,)):
                self.found.append(vsr)

    def unique(self, vsrs: list[VirtualServerRoute]) -> list[VirtualServerRoute]:
        out, seen = [], set()
        for vsr in vsrs:
            if _key(vsr) in seen:
                who = f"{self.vs.meta.namespace}/{self.vs.meta.name}"
                self.warnings.append(f"VS {who} has duplicate VirtualServerRoutes {_key(vsr)}")
                continue
            seen.add(_key(vsr))
            out.append(vsr)
        return out

    def without_conflicts(self, vsrs: list[VirtualServerRoute]) -> list[VirtualServerRoute]:
        own = {
            _location(str(r.path))
            for r in self.vs.routes
            if r.route is None and not r.route_selector
        }
        paths: dict[str, str] = {}
        dropped: set[str] = set()
        for vsr in vsrs:
            for sub in vsr.subroutes:
                path = str(sub.path)
                if _location(path) in own:
                    self.warnings.append(
                        f"path {path} of VirtualServerRoute {_key(vsr)} is a route of the "
                        "VirtualServer too (ferryman)"
                    )
                    dropped.add(_key(vsr))
                elif (other := paths.get(path)) is not None:
                    on = other if other == _key(vsr) else f"{_key(vsr)} and {other}"
                    self.warnings.append(f"path {path} has conflicting subroutes on {on}")
                    dropped.add(_key(vsr))
                else:
                    paths[path] = _key(vsr)
        return [v for v in vsrs if _key(v) not in dropped]


def _location(path: str) -> str:
    """The NGINX location a route's path is, for duplicates: ``/p`` and ``^~/p``
    are one location (NGINX refuses the pair as a duplicate)."""
    return path.removeprefix("^~")


def resolve(
    vs: VirtualServer, reads: RouteReads, served_class: str, hosts: HostRules | None = None
) -> Delegations:
    """The VirtualServerRoutes ``vs`` serves, and its warnings about the others;
    ``hosts``: tenant mode's rules (``configs/tenancy.py``)."""
    res = _Resolver(vs, reads, served_class, hosts)
    for r in vs.routes:
        if r.route is not None or r.route_selector:
            res.route(r)
    vsrs = res.unique(res.found)
    for vsr, paths in res.regex.values():  # dicts keep the order first named
        if res.checked(vsr, tuple(paths)):
            vsrs.append(vsr)
    vsrs = res.without_conflicts(res.unique(vsrs))
    routes = tuple(
        Delegated(vsr, res.error_pages.get(_key(vsr), ()), res.policies.get(_key(vsr), ()))
        for vsr in vsrs
    )
    return Delegations(routes, tuple(res.warnings))


def tenant_problem(vsr: VirtualServerRoute, vs: VirtualServer, hosts: HostRules | None) -> str:
    """Tenant mode: why a VirtualServerRoute may not serve under ``vs`` ("" when it may)."""
    namespace = vsr.meta.namespace
    if hosts is None or hosts.allows(namespace, vs.host):
        return ""
    return host_denied(namespace, vs.host)
