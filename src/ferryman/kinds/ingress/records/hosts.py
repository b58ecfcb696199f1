"""Which records an Ingress's hosts become, by what its annotations ask for.

- nothing beyond the fast path's (paths, TLS, ssl-redirect, round-robin or
  least_conn, max-fails, fail-timeout): the ``H`` record alone, routed by the
  C module;
- ``nginx.org/policies`` only: the stub ``H`` and the ``I`` V record
  (``ingress_policies``);
- any other option (``ingress_options``) or basic auth: the stub ``H`` and a
  VirtualServer-style V record (``ingress_vs``), with the policies in it.

A mergeable master's host is its minions' paths (``ingress_mergeable``), on
the fast path when none of them (nor the master) asks for more.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from ferryman.configs.endpoints import CLUSTER_IP
from ferryman.configs.model import CATCH_ALL, BackendKey, Route, VirtualHost, backend_key
from ferryman.configs.routes import backends_of
from ferryman.kinds.ingress.parse.ingress import Ingress
from ferryman.kinds.ingress.records.as_virtualserver import (
    Part,
    basic_auth,
    combined,
    ingress_vs_routing,
)
from ferryman.kinds.ingress.records.canary_host import JoinedPaths
from ferryman.kinds.ingress.records.limit_conn import client_limits_policy
from ferryman.kinds.ingress.records.limit_req import limit_req_policy
from ferryman.kinds.ingress.records.mergeable import (
    MASTER_DENYLIST,
    filtered,
    master_of,
    merge,
    minion_annotations,
)
from ferryman.kinds.ingress.records.options import IngressOptions, ingress_options
from ferryman.kinds.ingress.records.policies import (
    annotation_policies,
    client_check,
    ingress_policies,
    ingress_routing,
)
from ferryman.kinds.ingress.records.virtual_hosts import backend_of
from ferryman.kinds.policy.records.attach import NONE, Attached
from ferryman.kinds.policy.records.reads import PolicyReads
from ferryman.resources import validation
from ferryman.resources.sticky_cookie import StickyCookie

_Copied = TypeVar("_Copied", IngressOptions, VirtualHost)


@dataclass(frozen=True)
class Written:
    host: VirtualHost  # the H record's
    routing: str | None  # the V record, None: none
    backends: frozenset[BackendKey] = frozenset()
    fast: str | None = None  # the F record (ingress_vs), None: none
    client_check: str | None = None  # the M record (ingressMTLS), None: none


@dataclass
class Outcome:
    written: list[Written] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # A master's minions: namespace/name -> their warnings (served minions only).
    minions: dict[str, list[str]] = field(default_factory=dict)


def ingress_records(
    ing: Ingress,
    vhosts: list[VirtualHost],
    reads: PolicyReads,
    ingress_class: str,
    configmap: Mapping[str, str],
    *,
    mergeable: list[Ingress] | None = None,
    canaries: Mapping[str, JoinedPaths] | None = None,
) -> Outcome:
    """The records of ``vhosts`` (``ingress.virtual_hosts``) and the warnings;
    ``mergeable``: for a master, the mergeable Ingresses of its host;
    ``canaries``: per host ("" the catch-all) the paths canaries join."""
    out = Outcome()
    canaries = canaries or {}
    if ing.mergeable == "minion":
        out.warnings = _minion_warnings(ing, reads, ingress_class, configmap, mergeable or [])
    if not vhosts:
        return out
    if ing.mergeable == "master":
        return _master(ing, vhosts, reads, ingress_class, configmap, mergeable or [])
    options, out.warnings = ingress_options(ing.meta.annotations, configmap)
    options = _with(
        options,
        # nginx.org's win (translate said so in a Warning).
        rewrite_target=options.rewrite_target or ing.paths.rewrite_target,
        app_root=options.app_root or ing.paths.app_root,
        redirect=ing.paths.redirect,
        force_ssl_redirect=ing.paths.force_ssl_redirect,
        www=ing.paths.www,
        fallback=fallback_key(ing),
        custom_errors=custom_errors(ing),
        request_buffering=not ing.request_streamed,
        sticky=_conditional(options.sticky, ing.samesite_none_conditional),
    )
    # The fast path's settings as resolved with the ConfigMap's defaults.
    vhosts = [
        _with(vh, redirect_https=vh.tls and options.ssl_redirect, balancing=_balancing(options))
        for vh in vhosts
    ]
    if options.use_cluster_ip:
        vhosts = [cluster_ip_host(vh) for vh in vhosts]
    auth = _route_configs(ing, options, reads)
    if not options.slow() and auth is NONE and not canaries:
        if not ing.policies:
            out.written = [Written(vh, None, frozenset(backends_of(vh))) for vh in vhosts]
            return out
        guarded = ingress_policies(ing, reads, ingress_class)
        check = client_check(guarded)
        for vh in vhosts:
            stub, record, extra = ingress_routing(vh, guarded)
            backends = frozenset(backends_of(vh)) | extra
            out.written.append(Written(stub, record, backends, client_check=check))
        out.warnings += guarded.warnings
        return out
    policies = ingress_policies(ing, reads, ingress_class) if ing.policies else NONE
    attached = combined(policies, auth)
    out.warnings += attached.warnings
    for vh in vhosts:
        host = "" if vh.host == CATCH_ALL else vh.host
        part = Part(ing, options, attached, canaries.get(host, {}))
        r = ingress_vs_routing([part], vh, host, options, attached)
        out.written.append(Written(r.host, r.record, r.backends, r.fast, client_check(attached)))
    return out


def _master(
    master: Ingress,
    vhosts: list[VirtualHost],
    reads: PolicyReads,
    ingress_class: str,
    configmap: Mapping[str, str],
    mergeable: list[Ingress],
) -> Outcome:
    out = Outcome()
    host = master.rules[0].host
    annotations, out.warnings = filtered(master, MASTER_DENYLIST)
    plain = replace(master, meta=replace(master.meta, annotations=annotations))
    server, more = ingress_options(annotations, configmap)
    vh = replace(vhosts[0], redirect_https=vhosts[0].tls and server.ssl_redirect)
    out.warnings += more
    spec = combined(
        ingress_policies(plain, reads, ingress_class) if plain.policies else NONE,
        basic_auth(plain, server, reads),
    )
    out.warnings += spec.warnings
    merged = merge(host, mergeable)
    parts: list[Part] = []
    slow = server.slow() or bool(spec.configs) or spec.error
    for minion in merged.minions:
        _, warned = minion_annotations(minion, master)
        served, options, auth, more = _minion(minion, master, reads, ingress_class, configmap)
        policies = _effective(spec, auth)
        slow = slow or options.slow() or auth is not NONE
        slow = slow or _balancing(options) != _balancing(server)
        if not parts:
            # NIC's app-root is the master's server-level redirect (a minion's is
            # denied): carried by the first minion's locations, once.
            options = replace(options, app_root=server.app_root)
        parts.append(Part(served, options, policies))
        out.minions[f"{minion.meta.namespace}/{minion.meta.name}"] = [
            *warned,
            *more,
            *merged.warnings.get(f"{minion.meta.namespace}/{minion.meta.name}", []),
            *auth.warnings,
        ]
    if not slow:
        routes = _routes(host, parts)
        out.written = [_plain(replace(vh, routes=routes, balancing=_balancing(server)))]
        return out
    r = ingress_vs_routing(parts, vh, host, server, spec)
    out.written = [Written(r.host, r.record, r.backends, r.fast, client_check(spec))]
    return out


def fallback_key(ing: Ingress) -> str | None:
    """ingress-nginx's default-backend as a backend key: the Service's first port
    (the port ref "", ``Service.find_port``)."""
    service = ing.fallback_service
    return backend_key(ing.meta.namespace, service, "") if service else None


def custom_errors(ing: Ingress) -> tuple[str, tuple[int, ...]] | None:
    """ingress-nginx's custom-http-errors as the options carry them (IngressOptions)."""
    return (ing.meta.name, ing.error_codes) if ing.error_codes else None


def cluster_ip_host(vh: VirtualHost) -> VirtualHost:
    """``vh`` routing to its Services' ClusterIPs (``nginx.org/use-cluster-ip``):
    each backend key names the ClusterIP endpoint set (configs/endpoints.py)."""
    routes = tuple(replace(r, backend=r.backend + CLUSTER_IP) for r in vh.routes)
    default = vh.default_backend + CLUSTER_IP if vh.default_backend else None
    return replace(vh, routes=routes, default_backend=default)


def _minion(
    minion: Ingress,
    master: Ingress,
    reads: PolicyReads,
    ingress_class: str,
    configmap: Mapping[str, str],
) -> tuple[Ingress, IngressOptions, Attached, list[str]]:
    """A minion as its master serves it: with the annotations it keeps or
    inherits, its options, what its routes enforce and the options' warnings."""
    own, _ = minion_annotations(minion, master)
    options, warnings = ingress_options(own, configmap)
    options = replace(
        options,
        fallback=fallback_key(minion),
        custom_errors=custom_errors(minion),
        request_buffering=not minion.request_streamed,
        sticky=_conditional(options.sticky, minion.samesite_none_conditional),
    )
    served = replace(minion, meta=replace(minion.meta, annotations=own))
    auth = _route_configs(served, options, reads)
    if served.policies:
        # NIC writes a minion's policies into its locations.
        auth = combined(ingress_policies(served, reads, ingress_class), auth)
    return served, options, auth, warnings


def _minion_warnings(
    minion: Ingress,
    reads: PolicyReads,
    ingress_class: str,
    configmap: Mapping[str, str],
    mergeable: list[Ingress],
) -> list[str]:
    """A minion's own Event's warnings (its options' and its policies'): the
    master's render applies them, but the Event is the minion's."""
    master = master_of(minion.rules[0].host, mergeable)
    if master is None:
        return []
    _, _, auth, warnings = _minion(minion, master, reads, ingress_class, configmap)
    return [*warnings, *auth.warnings]


def _route_configs(ing: Ingress, options: IngressOptions, reads: PolicyReads) -> Attached:
    """What the Ingress's own annotations enforce on its routes as policies do:
    basic auth, the limit-req rate limit, ingress-nginx's connection limit and
    allow list, its access lists and cors."""
    out = basic_auth(ing, options, reads)
    ns, name = ing.meta.namespace, ing.meta.name
    limits = limit_req_policy(ns, name, options.limit_req)
    limits = client_limits_policy(ns, name, ing.client_limits, limits)
    if limits is not NONE:
        out = combined(out, limits)
    if ing.annotation_policies:
        out = combined(out, annotation_policies(ing, reads))
    return out  # NONE stays NONE when nothing applies: callers tell "nothing" by identity


def _plain(vh: VirtualHost) -> Written:
    """``vh`` as an H record alone: without the paths that are regular
    expressions (``nginx.org/path-regex``), which only the V record carries."""
    routes = tuple(
        r
        for r in vh.routes
        if validation.http_path(r.path, "Exact" if r.exact else "Prefix") is None
    )
    plain = replace(vh, routes=routes)
    return Written(plain, None, frozenset(backends_of(plain)))


def _effective(spec: Attached, route: Attached) -> Attached:
    if spec.error or route.error:
        return Attached({}, route.warnings, True)
    return Attached({**spec.configs, **route.configs}, route.warnings)


def _routes(host: str, parts: list[Part]) -> tuple[Route, ...]:
    routes = []
    for part in parts:
        for p in part.ing.rules[0].paths:
            exact = p.path_type == "Exact"
            path = p.path if exact else (p.path.rstrip("/") or "/")
            key = backend_of(part.ing, p.backend)
            key += CLUSTER_IP if part.options.use_cluster_ip else ""
            routes.append(Route(exact, path, key))
    return tuple(routes)


def _with(obj: _Copied, **changes: Any) -> _Copied:
    """``replace(obj, **changes)``, or ``obj`` itself when it has those values
    already: most Ingresses' options and hosts do, and ``replace`` runs a frozen
    class's ``__init__`` again (4.6% of a 30,000-Ingress start's CPU)."""
    if all(getattr(obj, k) == v for k, v in changes.items()):
        return obj
    return replace(obj, **changes)


def _balancing(o: IngressOptions) -> str:
    method = "lc" if o.lb_method == "least_conn" else "rr"
    timeout = f"{o.fail_timeout_ms / 1000:.3f}".rstrip("0").rstrip(".")
    return f"{method}:{o.max_fails}:{timeout}"


def _conditional(sticky: Mapping[str, StickyCookie], on: bool) -> Mapping[str, StickyCookie]:
    """The cookies with ingress-nginx's session-cookie-conditional-samesite-none."""
    if not on:
        return sticky
    return {s: replace(c, samesite_none_conditional=True) for s, c in sticky.items()}
