"""VirtualServer -> the records the Lua router serves it from, with no reload.

A VirtualServer host is two records:

- ``H`` (``configs/routes.py``), a stub with no route: the host's certificate
  for the TLS handshake, and the name ngx_http_ferryman_module finds, so the
  module's fast path (which routes Ingress hosts only) finds no route and hands
  every request of the host to the Lua slow path, and never lets a request for
  it fall through to a wildcard's or the catch-all's Ingress routes;
- ``V``, its routing, which only the Lua router reads (the module never sees it):

  ``<redirect> <item> <item> ...`` (fields split by one space), where
  ``<redirect>`` is ``-`` or ``<code>:<s|x>`` (tls.redirect, based on the
  scheme or X-Forwarded-Proto), and each item is an upstream or a route:

  - ``U|<backend>|<balancing>|<max_fails>|<fail_timeout>|<connect>|<read>|<send>|<tries>|``
    ``<key>|<fields>``
    (balancing ``rr``, ``lc``, ``r`` random, ``r2`` random two least_conn,
    ``ip`` ip_hash, ``h`` hash and ``hc`` hash consistent of ``key``; times in s,
    ``-`` when unset; ``fields``: ``configs/vs_upstream.py``; upstreams are
    numbered from 1 in order);
  - ``R|<E|N|P|X|I>|<path>|<proxies 0|1>|<matches>|<default>|<errorPages>``: ``=``, ``^~``,
    prefix, ``~``, ``~*``; ``proxies``: NGINX's auto_redirect applies
    (``vs_routes``); ``<matches>``: ``;``-separated ``<conditions>><splits>``,
    conditions ``&``-separated ``<variable>.<value>``; ``<splits>`` and
    ``<default>``: ``,``-separated ``<weight>:<action>``; an action is
    ``p.<upstream>.<rewritePath>.<set>.<add>.<hide>.<drop>.<pass>.<ignore>`` (pass,
    or proxy: the rewrite, the request headers to set, ``^``-separated
    ``<name>~<value>``, the response headers to add, ``<name>~<value>~<always 0|1>``,
    and to hide, ``^``-separated names, ``1`` to drop the client's headers, and
    the response headers to pass and to ignore, ``^``-separated names
    (``configs/vs_response.py``); each may be empty),
    ``d.<code>.<url>`` (redirect) or
    ``t.<code>.<type>.<body>.<headers>`` (return; headers ``^``-separated
    ``<name>~<value>``); ``<errorPages>``: ``;``-separated ``<codes>><action>``,
    codes ``:``-separated, the action a redirect or a return (code 0: the
    original status).

Every string from the resource (paths, regular expressions, variables, values,
URLs, bodies, header names and values) is base64 in the record, whose alphabet
has none of the separators, so no value can be read as structure; numbers and
backend keys (validated names) are written as they are. The values themselves
passed ``resources/nic_rules.py`` first.

What the slice does not route yet makes the VirtualServer ``Warning``, each
field named (``warnings``); nothing is silently ignored.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from ferryman.configs.ingress import SecretState
from ferryman.configs.model import BackendKey, VirtualHost, backend_key
from ferryman.configs.vs_response import UNIGNORABLE, unignorable
from ferryman.configs.vs_routes import Location, source_variable, unquote
from ferryman.configs.vs_upstream import unsupported, upstream_fields
from ferryman.resources.nic_action import Action, Pass, Proxy, Redirect
from ferryman.resources.nic_match import Split
from ferryman.resources.nic_route import Route
from ferryman.resources.nic_upstream import Upstream
from ferryman.resources.virtualserver import VirtualServer

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
# NIC's defaults on open-source NGINX where ferryman's differ from NGINX's own.
_MAX_FAILS = 1
_FAIL_TIMEOUT_MS = 10_000


@dataclass(frozen=True)
class VSRecords:
    host: VirtualHost  # the H stub
    record: str  # the V record
    backends: frozenset[BackendKey]
    warnings: tuple[str, ...]


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode("ascii")


def _seconds(ms: int | None) -> str:
    return "-" if ms is None else f"{ms / 1000:.3f}".rstrip("0").rstrip(".")


class _Builder:
    def __init__(self, vs: VirtualServer) -> None:
        self.vs = vs
        self.warnings: list[str] = []
        self.upstreams: dict[str, int] = {}
        self.items: list[str] = []
        self.backends: set[BackendKey] = set()
        for i, u in enumerate(vs.upstreams):
            self.upstreams[u.name] = i + 1
            self.items.append(self._upstream(i, u))

    def warn(self, where: str, what: str) -> None:
        self.warnings.append(f"{where}: {what}")

    def _upstream(self, i: int, u: Upstream) -> str:
        where = f"spec.upstreams[{i}]"
        key = backend_key(u.service_namespace or self.vs.meta.namespace, u.service, str(u.port))
        self.backends.add(key)
        lb = u.lb_method
        hash_key = lb.hash_key if lb else ""
        if lb and lb.method == "hash":
            balancing = "hc" if lb.consistent else "h"
        else:
            balancing = _BALANCING[lb.method if lb else "round_robin"]
        for field, why in unsupported(u).items():
            self.warn(f"{where}.{field}", why)
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

    def route(self, i: int, r: Route) -> None:
        where = f"spec.routes[{i}]"
        if r.route is not None or r.route_selector:
            field = "route" if r.route is not None else "routeSelector"
            self.warn(f"{where}.{field}", "VirtualServerRoutes are not routed yet: 404")
            return
        if r.policies:
            self.warn(f"{where}.policies", "policies are not enforced yet")
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
        pages = ";".join(
            ":".join(str(c) for c in page.codes)
            + ">"
            + self.action(f"{where}.errorPages[{p_i}]", page.response)
            for p_i, page in enumerate(r.error_pages)
        )
        fields = [
            "R",
            _MODIFIERS[loc.modifier],
            b64(loc.path),
            "1" if loc.proxies else "0",
            ";".join(matches),
            default,
            pages,
        ]
        self.items.append("|".join(fields))


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


def routed(vs: VirtualServer) -> list[Route]:
    """The routes the V record carries, in order (delegations are not routed yet)."""
    return [r for r in vs.routes if r.route is None and not r.route_selector]


def vs_records(vs: VirtualServer, secret: SecretState | None) -> VSRecords:
    """The records of ``vs``'s host; ``secret``: the state of its TLS Secret (None: no TLS)."""
    b = _Builder(vs)
    if vs.policies:
        b.warn("spec.policies", "policies are not enforced yet")
    for i, r in enumerate(vs.routes):
        b.route(i, r)
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
                f"TLS secret {vs.meta.namespace}/{vs.tls.secret if vs.tls else ''} is unusable "
                f"({secret.error}): TLS handshakes for {vs.host} are rejected"
            )
    host = VirtualHost(host=vs.host, routes=(), default_backend=None, tls=tls, cert_id=cert_id)
    record = " ".join([redirect, *b.items])
    return VSRecords(host, record, frozenset(b.backends), tuple(b.warnings))
