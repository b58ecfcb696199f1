"""VirtualServer -> the records the Lua router serves it from, with no reload.

A VirtualServer host is two records:

- ``H`` (``configs/routes.py``), a stub with no route: the host's certificate
  for the TLS handshake, and the name ngx_http_ferryman_module finds, so the
  module never lets a request for it fall through to a wildcard's or the
  catch-all's Ingress routes; the module routes the host only by its ``F``
  record (``vs_fast``: the routes it serves in C, written beside ``V`` from the
  same routes) and hands every other request to the Lua slow path;
- ``V``, its routing, which only the Lua router reads (the module never sees it):

  ``<redirect> <item> <item> ...`` (fields split by one space), where
  ``<redirect>`` is ``-`` or ``<code>:<s|x|i>`` (tls.redirect, based on the
  scheme or X-Forwarded-Proto; ``i``: an Ingress's redirect-to-https, when
  X-Forwarded-Proto is ``http``, ``kinds/ingress/records/as_virtualserver.py``), and each item is
  an upstream or a route:

  - ``U|<backend>|<balancing>|<max_fails>|<fail_timeout>|<connect>|<read>|<send>|<tries>|``
    ``<key>|<fields>``
    (balancing ``rr``, ``lc``, ``r`` random, ``r2`` random two least_conn,
    ``ip`` ip_hash, ``h`` hash and ``hc`` hash consistent of ``key``; times in s,
    ``-`` when unset; ``fields``: ``kinds/virtualserver/records/upstream.py``; upstreams are
    numbered from 1 in order);
  - ``R|<E|N|P|X|I>|<path>|<proxies 0|1>|<matches>|<default>|<errorPages>|<policies>[|<flags>]``:
    ``=``, ``^~``, prefix, ``~``, ``~*``; ``proxies``: NGINX's auto_redirect applies
    (``vs_routes``); ``<matches>``: ``;``-separated ``<conditions>><splits>``,
    conditions ``&``-separated ``<variable>.<value>``; ``<splits>`` and
    ``<default>``: ``,``-separated ``<weight>:<action>``; an action is
    ``p.<upstream>.<rewritePath>.<set>.<add>.<hide>.<drop>.<pass>.<ignore>`` (pass,
    or proxy: the rewrite, the request headers to set, ``^``-separated
    ``<name>~<value>``, the response headers to add, ``<name>~<value>~<always 0|1>``,
    and to hide, ``^``-separated names, ``1`` to drop the client's headers, and
    the response headers to pass and to ignore, ``^``-separated names
    (``kinds/virtualserver/records/response.py``); each may be empty),
    ``d.<code>.<url>`` (redirect) or
    ``t.<code>.<type>.<body>.<headers>`` (return; headers ``^``-separated
    ``<name>~<value>``); ``<errorPages>``: ``;``-separated ``<codes>><action>``,
    codes ``:``-separated, the action a redirect or a return (code 0: the
    original status); ``<policies>``: the P items the route enforces
    (``vs_policies``), ``,``-separated, ``!`` to answer 500; ``<flags>``
    (absent: none), letters: ``g`` a gRPC route, proxied from
    ``@ferryman_grpc`` with grpc_pass (``vs_grpc``), ``u`` unbuffered (an
    Ingress's, ``kinds/ingress/records/as_virtualserver.py``, or every upstream the route proxies
    to has ``buffering: false``), ``b<kib>`` a buffer tier
    (``configs/buffer_tiers.py``: the largest its upstreams ask for);
  - ``P|<letter>|<fields>``: one policy configuration (``configs/policy_*.py``
    document each kind's fields; ``dataplane/lua/ferryman_policy.lua`` enforces
    them), numbered from 1 in order;
  - ``S|<policies>``: the VirtualServer's own policies, for requests no route
    matches (``!``: every request of the host answers 500).

Every string from the resource (paths, regular expressions, variables, values,
URLs, bodies, header names and values) is base64 in the record, whose alphabet
has none of the separators, so no value can be read as structure; numbers and
backend keys (validated names) are written as they are. The values themselves
passed ``resources/nic_rules.py`` first.

What the slice does not route yet makes the VirtualServer ``Warning``, each
field named (``warnings``); nothing is silently ignored.

A route delegating to VirtualServerRoutes (``vs_delegation``) is replaced by
their subroutes, after the VirtualServer's own routes (where NIC writes their
locations); each VirtualServerRoute's upstreams join the record's numbering,
its services resolved in its own namespace, and its warnings are its own
(``VSRecords.routes``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ferryman.configs.buffer_tiers import route_flags
from ferryman.configs.endpoints import CLUSTER_IP
from ferryman.configs.model import BackendKey, VirtualHost, backend_key
from ferryman.configs.record_text import b64, unquote
from ferryman.configs.secret_state import SecretRead, SecretState
from ferryman.configs.sticky_field import sticky_field
from ferryman.configs.tenancy import REFUSED, SERVICE, Grants, check
from ferryman.kinds.policy.parse.policy import Policy
from ferryman.kinds.policy.records.attach import NONE, Attached, PolicyItems, attach, effective
from ferryman.kinds.policy.records.base import ROUTE, SPEC, SUBROUTE, Owner
from ferryman.kinds.policy.records.ingress_mtls import ClientCerts
from ferryman.kinds.policy.records.reads import PolicyReads
from ferryman.kinds.virtualserver.parse.action import Action, Pass, Proxy, Redirect
from ferryman.kinds.virtualserver.parse.match import Split
from ferryman.kinds.virtualserver.parse.route import Route
from ferryman.kinds.virtualserver.parse.virtualserver import VirtualServer
from ferryman.kinds.virtualserver.records.delegation import Delegated
from ferryman.kinds.virtualserver.records.fast import FastRoute, fast_record
from ferryman.kinds.virtualserver.records.grpc import (
    GRPC_FLAG,
    grpc_pages,
    is_grpc,
    proxied,
    route_is_grpc,
    upstream_warning,
)
from ferryman.kinds.virtualserver.records.locations import Location, source_variable
from ferryman.kinds.virtualserver.records.response import UNIGNORABLE, unignorable
from ferryman.kinds.virtualserver.records.upstream import buffer_tier, unsupported, upstream_fields
from ferryman.resources.meta import ObjectRef
from ferryman.resources.nic_upstream import Upstream

_MODIFIERS = {"=": "E", "^~": "N", "": "P", "~": "X", "~*": "I"}
# lb-method -> the U record's balancing: NGINX's "random two" is "random two least_conn".
_BALANCING = {
    "round_robin": "rr",
    "least_conn": "lc",
    "random": "r",
    "random two": "r2",
    "random two least_conn": "r2",
    "ip_hash": "ip",
}
# NIC builds a routeSelector's LabelSelector from matchLabels alone (its
# configuration.go): matchExpressions select nothing more, nothing less.
SELECTOR_EXPRESSIONS = "ignored, as NIC ignores it: VirtualServerRoutes are selected by matchLabels"
# NIC's defaults on open-source NGINX where ferryman's differ from NGINX's own.
_MAX_FAILS = 1
_FAIL_TIMEOUT_MS = 10_000


@dataclass(frozen=True)
class VSRecords:
    host: VirtualHost  # the H stub
    record: str  # the V record
    backends: frozenset[BackendKey]
    warnings: tuple[str, ...]
    # The VirtualServerRoutes served, each with its own warnings.
    routes: Mapping[ObjectRef, tuple[str, ...]]
    client_check: str | None = None  # the M record (ingressMTLS), None: none
    fast: str | None = None  # the F record (``vs_fast``), None: none


def _seconds(ms: int | None) -> str:
    return "-" if ms is None else f"{ms / 1000:.3f}".rstrip("0").rstrip(".")


class _Builder:
    def __init__(
        self,
        vs: VirtualServer,
        spec: Attached,
        policy_items: PolicyItems,
        grpc_ready: bool,
        grants: Grants,
    ) -> None:
        self.vs = vs
        self.grants = grants  # tenant mode's references across namespaces
        self.spec = spec
        self.policy_items = policy_items
        # TLS termination and HTTP/2: what NIC's gRPC upstreams need (``vs_grpc``).
        self.grpc_ready = grpc_ready
        self.warnings: list[str] = []
        self.items: list[str] = []
        self.backends: set[BackendKey] = set()
        self.count = 0  # upstreams in the record so far
        # The same upstreams and routes for the F record (``vs_fast``).
        self.fast_upstreams: list[tuple[BackendKey, Upstream]] = []
        self.fast_routes: list[FastRoute] = []
        # The names of gRPC upstreams in ``upstreams``.
        self.grpc: set[str] = set()
        # Each upstream's (buffer tier, unbuffered), by number (``buffer_tiers``).
        self.buffers: dict[int, tuple[int | None, bool]] = {}
        # The upstream names the routes being built use: the VirtualServer's, or
        # a VirtualServerRoute's while its subroutes are built (``owner``).
        self.upstreams = self.add_upstreams(vs.meta.namespace, vs.upstreams)

    def add_upstreams(
        self, namespace: str, upstreams: tuple[Upstream, ...], kind: str = "VirtualServer"
    ) -> dict[str, int]:
        """Number ``upstreams`` after those in the record; their services are in
        ``namespace`` unless they name one; ``kind``: the resource naming them."""
        named = {}
        self.grpc = {u.name for u in upstreams if is_grpc(u)}
        for i, u in enumerate(upstreams):
            self.count += 1
            named[u.name] = self.count
            self.buffers[self.count] = (buffer_tier(u)[0], u.buffering is False)
            self.items.append(self._upstream(i, u, namespace, kind))
        return named

    @contextmanager
    def owner(self, upstreams: dict[str, int], warnings: list[str]) -> Iterator[None]:
        """Build a VirtualServerRoute's part: its upstream names, its warnings."""
        saved = self.upstreams, self.warnings, self.grpc
        self.upstreams, self.warnings = upstreams, warnings
        try:
            yield
        finally:
            self.upstreams, self.warnings, self.grpc = saved

    def warn(self, where: str, what: str) -> None:
        self.warnings.append(f"{where}: {what}")

    def _upstream(self, i: int, u: Upstream, namespace: str, kind: str) -> str:
        where = f"spec.upstreams[{i}]"
        service_ns = u.service_namespace or namespace
        key = backend_key(service_ns, u.service, str(u.port))
        if u.use_cluster_ip:
            # As the Ingress annotation: the endpoint set of one peer, the ClusterIP.
            key += CLUSTER_IP
        why = check(self.grants, kind, namespace, SERVICE, service_ns, u.service)
        if why is not None:
            # Tenant mode: as a Service that does not exist (no endpoints: 503).
            self.warn(f"{where}.service", why)
            key = REFUSED
        else:
            self.backends.add(key)
        self.fast_upstreams.append((key, u))
        lb = u.lb_method
        hash_key = lb.hash_key if lb else ""
        if lb and lb.method == "hash":
            balancing = "hc" if lb.consistent else "h"
        else:
            balancing = _BALANCING[lb.method if lb else "round_robin"]
        for field, why in unsupported(u).items():
            self.warn(f"{where}.{field}", why)
        if (grpc_why := upstream_warning(u, self.grpc_ready)) is not None:
            self.warn(f"{where}.type", grpc_why)
        fields = [
            "U",
            key,
            balancing,
            str(_MAX_FAILS if u.max_fails is None else u.max_fails),
            _seconds(_FAIL_TIMEOUT_MS if u.fail_timeout_ms is None else u.fail_timeout_ms),
            _seconds(u.connect_timeout_ms),
            _seconds(u.read_timeout_ms),
            _seconds(u.send_timeout_ms),
            str(u.next_upstream_tries),
            b64(hash_key),
            upstream_fields(u),
            *([sticky_field(u.session_cookie)] if u.session_cookie else []),
        ]
        return "|".join(fields)

    def action(self, where: str, a: Action) -> str:
        if isinstance(a, Pass):
            return f"p.{self.upstreams[a.upstream]}.."
        if isinstance(a, Proxy):
            headers = [f"{b64(h.name)}~{b64(unquote(h.value))}" for h in a.set_request_headers]
            for i, name in unignorable(a.ignore_response_headers):
                self.warn(f"{where}.proxy.responseHeaders.ignore[{i}]", f"{name} {UNIGNORABLE}")
            add = "^".join(
                f"{b64(h.name)}~{b64(unquote(h.value))}~{int(h.always)}"
                for h in a.add_response_headers
            )
            hide = "^".join(b64(name) for name in a.hide_response_headers)
            rewrite = b64(a.rewrite_path)
            up = self.upstreams[a.upstream]
            drop = "" if a.pass_request_headers else "1"
            passed = "^".join(b64(name) for name in a.pass_response_headers)
            ignored = "^".join(b64(name) for name in a.ignore_response_headers)
            return f"p.{up}.{rewrite}.{'^'.join(headers)}.{add}.{hide}.{drop}.{passed}.{ignored}"
        if isinstance(a, Redirect):
            return f"d.{a.code}.{b64(a.url)}"
        added = "^".join(f"{b64(h.name)}~{b64(h.value)}" for h in a.headers)
        return f"t.{a.code}.{b64(a.type)}.{b64(unquote(a.body))}.{added}"

    def splits(self, where: str, splits: tuple[Split, ...]) -> str:
        return ",".join(
            f"{s.weight}:{self.action(f'{where}[{i}].action', s.action)}"
            for i, s in enumerate(splits)
        )

    def outcome(self, where: str, action: Action | None, splits: tuple[Split, ...]) -> str:
        if action is not None:
            return f"100:{self.action(f'{where}.action', action)}"
        return self.splits(f"{where}.splits", splits)

    def route(self, i: int, r: Route, policies: Attached, key: str = "routes") -> None:
        where = f"spec.{key}[{i}]"
        if r.selector_expressions:
            self.warn(f"{where}.routeSelector.matchExpressions", SELECTOR_EXPRESSIONS)
        if r.route is not None or r.route_selector:
            return  # its VirtualServerRoutes' subroutes come after the routes
        self.warnings.extend(w for w in policies.warnings if w not in self.warnings)
        matches = []
        for m_i, m in enumerate(r.matches):
            conditions = "&".join(
                f"{b64(source_variable(c.kind, c.name))}.{b64(unquote(c.value))}"
                for c in m.conditions
            )
            outcome = self.outcome(f"{where}.matches[{m_i}]", m.action, m.splits)
            matches.append(f"{conditions}>{outcome}")
        default = self.outcome(where, r.action, r.splits)
        loc = location(r)
        grpc, mixed = route_is_grpc(r, self.grpc)
        if mixed:
            self.warn(where, mixed)
        error_pages = r.error_pages
        if grpc:
            error_pages, dropped = grpc_pages(error_pages, proxied(r))
            for why in dropped:
                self.warn(f"{where}.errorPages", why)
        pages = ";".join(
            ":".join(str(c) for c in page.codes)
            + ">"
            + self.action(f"{where}.errorPages[{p_i}]", page.response)
            for p_i, page in enumerate(error_pages)
        )
        attached = effective(self.spec, policies)
        enforced = self.policy_items.reference(attached)
        fields = [
            "R",
            _MODIFIERS[loc.modifier],
            b64(loc.path),
            "1" if loc.proxies else "0",
            ";".join(matches),
            default,
            pages,
            enforced,
        ]
        if grpc:
            fields.append(GRPC_FLAG)  # grpc_pass: proxy buffers do not apply
        else:
            used = [self.buffers[self.upstreams[name]] for name in sorted(proxied(r))]
            flags, mixed_buffering = route_flags(used)
            if mixed_buffering is not None:
                self.warn(where, mixed_buffering)
            if flags:
                fields.append(flags)
        self.items.append("|".join(fields))
        self.fast_routes.append(FastRoute(loc, r, enforced, self.upstreams, attached))


def location(r: Route) -> Location:
    """The NGINX location NIC writes for route ``r`` (``vs_routes`` matches with it)."""
    regex = r.path.modifier.startswith("~")
    proxies = (
        not r.matches
        and isinstance(r.action, Pass | Proxy)
        and not regex
        and r.path.value.endswith("/")
    )
    # NGINX reads a location's regex with its escape rule for tokens.
    return Location(r.path.modifier, unquote(r.path.value) if regex else r.path.value, proxies)


def routed(vs: VirtualServer, delegated: tuple[Delegated, ...] = ()) -> list[Route]:
    """The routes the V record carries, in order: the VirtualServer's own, then
    the subroutes of the VirtualServerRoutes it delegates to."""
    own = [r for r in vs.routes if r.route is None and not r.route_selector]
    return own + [d.subroute(r) for d in delegated for r in d.vsr.subroutes]


class _NoPolicies:
    """Reads where no Policy exists (a render without a store)."""

    def policy(self, namespace: str, name: str) -> Policy | None:
        return None

    def secret_read(
        self, namespace: str, name: str, parser: Callable[[Mapping[str, Any]], Any]
    ) -> SecretRead[Any]:
        return SecretRead(None, "", "secret doesn't exist or of an unsupported type")

    def granted(
        self, from_kind: str, from_namespace: str, to: tuple[str, str], namespace: str, name: str
    ) -> bool:
        return True  # no host policy either


def _subroutes(
    b: _Builder, d: Delegated, owner: Callable[[str, str, str, str], Owner], reads: PolicyReads
) -> tuple[str, ...]:
    """Add ``d``'s upstreams and subroutes; returns its warnings. NIC: a subroute
    enforces its own policies, else those of the VS route delegating to it."""
    warnings: list[str] = []
    vsr = d.vsr.meta
    with b.owner({}, warnings):
        b.upstreams = b.add_upstreams(vsr.namespace, d.vsr.upstreams, "VirtualServerRoute")
        for i, r in enumerate(d.vsr.subroutes):
            path = str(r.path)
            if r.policies:
                policies = attach(r.policies, owner(vsr.namespace, vsr.name, SUBROUTE, path), reads)
            elif d.policies:
                vs = b.vs.meta
                policies = attach(d.policies, owner(vs.namespace, vs.name, ROUTE, path), reads)
            else:
                policies = NONE
            b.route(i, d.subroute(r), policies, "subroutes")
    return tuple(warnings)


def vs_records(
    vs: VirtualServer,
    secret: SecretState | None,
    *,
    reads: PolicyReads | None = None,
    ingress_class: str = "",
    delegated: tuple[Delegated, ...] = (),
    http2: bool = False,
) -> VSRecords:
    """The records of ``vs``'s host; ``secret``: the state of its TLS Secret (None:
    no TLS); ``reads``: where its Policies (and their Secrets) are read;
    ``ingress_class``: the class served (a Policy of another is not used);
    ``delegated``: the VirtualServerRoutes it serves (``vs_delegation``);
    ``http2``: the ConfigMap's http2 (gRPC upstreams need it, ``vs_grpc``)."""
    found: PolicyReads = reads if reads is not None else _NoPolicies()
    ns, name = vs.meta.namespace, vs.meta.name

    def owner(o_ns: str, o_name: str, context: str, path: str = "/") -> Owner:
        kind = "VirtualServerRoute" if context == SUBROUTE else "VirtualServer"
        tls = secret is not None
        return Owner(o_ns, o_name, ns, name, context, path, tls, ingress_class, kind)

    spec = attach(vs.policies, owner(ns, name, SPEC), found) if vs.policies else NONE
    items = PolicyItems()
    b = _Builder(vs, spec, items, grpc_ready=secret is not None and http2, grants=found)
    b.warnings.extend(spec.warnings)
    for i, r in enumerate(vs.routes):
        route = (
            attach(r.policies, owner(ns, name, ROUTE, str(r.path)), found) if r.policies else NONE
        )
        b.route(i, r, route)
    routes = {d.ref: _subroutes(b, d, owner, found) for d in delegated}
    redirect = "-"
    if vs.tls and vs.tls.redirect:
        based = "x" if vs.tls.redirect.based_on == "x-forwarded-proto" else "s"
        redirect = f"{vs.tls.redirect.code}:{based}"
    cert_id = None
    tls = secret is not None
    if secret is not None:
        cert_id = secret.cert_id
        if cert_id is None:
            b.warnings.append(
                f"TLS secret {_secret_name(vs)} is unusable "
                f"({secret.error}): TLS handshakes for {vs.host} are rejected"
            )
    host = VirtualHost(host=vs.host, routes=(), default_backend=None, tls=tls, cert_id=cert_id)
    if vs.policies:
        # CORS is written into NIC's locations only: not for requests no route matches.
        items.items.append("S|" + items.reference(spec, route_only=frozenset("c")))
    record = " ".join([redirect, *b.items, *items.items])
    client = spec.configs.get(ClientCerts)
    check = client.record() if isinstance(client, ClientCerts) else None
    fast = fast_record(vs, b.fast_upstreams, b.fast_routes, spec)
    backends = frozenset(b.backends | items.backends)
    return VSRecords(host, record, backends, tuple(b.warnings), routes, check, fast)


def _secret_name(vs: VirtualServer) -> str:
    if vs.tls and vs.tls.secret:
        return f"{vs.meta.namespace}/{vs.tls.secret}"
    return "--wildcard-tls-secret"
