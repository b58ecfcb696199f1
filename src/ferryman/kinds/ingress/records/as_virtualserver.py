"""An Ingress host whose annotations ask for per-request features, written as
a VirtualServer's host is (``kinds/virtualserver/records/virtualserver.py``): a stub ``H`` record
and a ``V`` record that ``dataplane/lua/ferryman_vs.lua`` routes, so the
Ingress reuses the VirtualServer engine (timeouts, lb-method, max-conns,
keepalive, body size, TLS to the backend, header hide/pass, rewrites,
policies) rather than a second one. No reload: all of it is records.

Kubernetes path semantics in NGINX locations (``vs_routes.find_location``):
an Exact path is ``= path``; a Prefix path ``/p`` is ``= /p`` and ``/p/``
(element-wise, as the fast path matches: never ``/pq``), ``/`` is ``/``;
the defaultBackend is ``/`` unless a path is. With ``nginx.org/path-regex``
each path is NIC's: ``~ "^path"`` (``case_sensitive``), ``~* "^path"``
(``case_insensitive``) or ``= path`` (``exact``).

``nginx.org/rewrites`` as NIC's ``proxy_pass http://upstream<rewrite>``: the
location's prefix is replaced by the rewrite (for ``/p`` written without a
trailing slash, ``/p/rest`` becomes ``<rewrite>/rest``, as NGINX does for
``location /p``); a path written ``/p/`` answers ``/p`` with 301 to ``/p/``,
as NGINX's auto_redirect does for NIC's ``location /p/``.

``nginx.org/rewrite-target`` and ingress-nginx's ``rewrite-target``
(``_ingress_nginx``) as NGINX's ``rewrite <pattern> <target> break``: on a
regex path the location's expression with its groups (the route flag ``i``:
matched caseless, ``(?i)``), on any other path the whole URI becomes the
target (flag ``w``). ``nginx.org/app-root`` (and ingress-nginx's) is an exact
``/`` answering 302; ingress-nginx's permanent/temporal redirects make every
route a redirect action (``d.<code>.<url>``), its from-to-www-redirect host
one ``/`` route answering 308; its force-ssl-redirect is the record's
redirect ``308:t`` (``308:s`` with preserve-trailing-slash).

``nginx.org/proxy-redirect-from``/``-to`` are a tenth field of the proxy
action (``_proxy_redirect``), which ferryman_proxy_redirect.lua applies to the
upstream's Location and Refresh headers, as NGINX's proxy_redirect.

Host options beyond the VirtualServer's grammar are one more item,
``O|<hsts>|<behind proxy 0|1>|<server tokens 0|1>`` (``hsts``: the header's
value, base64, empty for none), read by ``ferryman_vs.lua`` and applied in
``ferryman.lua``'s header filter. A route of an Ingress with
``nginx.org/proxy-buffering: "false"`` has the flag ``u`` (the R item's ninth
field): ferryman_vs.lua sends its requests to ``@ferryman_unbuffered``, the
slow path's location with ``proxy_buffering off`` declared once in nginx.conf
(the directive takes no variable; the location is constant, so no reload). A
path to a service of ``nginx.org/grpc-services`` has the flag ``g``: its
requests go to ``@ferryman_grpc`` (grpc_pass, ``kinds/virtualserver/records/grpc.py``), as NIC
writes ``grpc_pass`` for them, when the ConfigMap's http2 is on (NIC ignores
the annotation otherwise: ``ingress_options``). ``nginx.org/proxy-buffer-size``,
``proxy-buffers`` and ``proxy-busy-buffers-size`` give the flag ``b<kib>``:
its requests go to the slow path's location of that buffer tier
(``@ferryman_b<kib>``, or ``@ferryman_unbuffered_b<kib>`` with ``u``;
``configs/buffer_tiers.py``).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from ferryman.configs.endpoints import CLUSTER_IP
from ferryman.configs.model import BackendKey, VirtualHost, backend_key
from ferryman.configs.record_text import b64
from ferryman.configs.sticky_field import sticky_field
from ferryman.kinds.ingress.parse.ingress import Ingress, ServiceBackend
from ferryman.kinds.ingress.records.canary import canary_module_fields, canary_route_fields
from ferryman.kinds.ingress.records.canary_host import Joined
from ferryman.kinds.ingress.records.options import IngressOptions
from ferryman.kinds.policy.records.access import module_access
from ferryman.kinds.policy.records.attach import NONE, Attached, PolicyItems
from ferryman.kinds.policy.records.auth import Basic
from ferryman.kinds.policy.records.base import Enforced
from ferryman.kinds.policy.records.reads import PolicyReads
from ferryman.resources.secret_policy import HTPASSWD_TYPE, Htpasswd, parse_htpasswd_secret
from ferryman.resources.sticky_cookie import StickyCookie

_BALANCING = {
    "round_robin": "rr",
    "least_conn": "lc",
    "random": "r",
    "random two": "r2",
    "random two least_conn": "r2",
    "ip_hash": "ip",
}


@dataclass(frozen=True)
class _Location:
    modifier: str  # the V record's: E, P, X, I
    path: str
    backend: ServiceBackend
    rewrite: str | None  # the rewrite path, as the location replaces its prefix
    proxies: bool = False  # NGINX's auto_redirect: /p answers 301 to /p/
    caseless: bool = False  # the rewrite matches the path caseless (ingress-nginx's (?i))
    whole: bool = False  # the rewrite replaces the whole URI (rewrite-target on a plain path)
    answer: str | None = None  # a redirect action (``d.<code>.<url>``) instead of proxying
    # The Ingress path and pathType it serves (a canary joins by them).
    source: tuple[str, str] | None = None


def _proxy_redirect(o: IngressOptions) -> str:
    """The action's tenth field, ``<mode>~<redirect>~<replacement>`` (base64):
    mode ``p`` a prefix, ``r`` a regular expression, ``i`` a caseless one
    (``ferryman_proxy_redirect.lua``); empty for none."""
    if o.proxy_redirect is None:
        return ""
    origin, replacement = o.proxy_redirect
    mode = "p"
    if origin.startswith("~*"):
        mode, origin = "i", origin[2:]
    elif origin.startswith("~"):
        mode, origin = "r", origin[1:]
    return f"{mode}~{b64(origin)}~{b64(replacement)}"


def _seconds(ms: int | None) -> str:
    return "-" if ms is None else f"{ms / 1000:.3f}".rstrip("0").rstrip(".")


def _locations(ing: Ingress, host: str, options: IngressOptions) -> list[_Location]:
    """Each path of ``host`` as the NGINX location(s) that serve it, in order."""
    exact: dict[str, _Location] = {}
    other: dict[tuple[str, str], _Location] = {}
    regex = options.path_regex
    derived: list[_Location] = []
    rule_backend: ServiceBackend | None = None
    for rule in ing.rules:
        if rule.host != host:
            continue
        for p in rule.paths:
            rule_backend = rule_backend or p.backend
            rewrite = options.rewrites.get(p.backend.service)
            if p.path_type == "Exact" or regex == "exact":
                exact.setdefault(
                    p.path, _Location("E", p.path, p.backend, rewrite, source=(p.path, p.path_type))
                )
            elif regex in ("case_sensitive", "case_insensitive"):
                modifier = "X" if regex == "case_sensitive" else "I"
                key = (modifier, p.path)
                loc = _Location(
                    modifier, "^" + p.path, p.backend, rewrite, source=(p.path, p.path_type)
                )
                other.setdefault(key, loc)
            else:
                stem = p.path.rstrip("/")
                if not stem:
                    root = _Location("P", "/", p.backend, rewrite, source=(p.path, p.path_type))
                    other.setdefault(("P", "/"), root)
                    continue
                slash = rewrite
                if rewrite is not None and not p.path.endswith("/"):
                    slash = rewrite + "/"
                # NIC's "location /p/" with a rewrite answers /p with 301 to /p/
                # (NGINX's auto_redirect; its rewrites README says so).
                redirects = rewrite is not None and p.path.endswith("/")
                if not redirects:
                    derived.append(
                        _Location("E", stem, p.backend, rewrite, source=(p.path, p.path_type))
                    )
                loc = _Location(
                    "P", stem + "/", p.backend, slash, redirects, source=(p.path, p.path_type)
                )
                other.setdefault(("P", stem + "/"), loc)
    for loc in derived:
        exact.setdefault(loc.path, loc)
    if ing.default_backend is not None and ("P", "/") not in other:
        other[("P", "/")] = _Location("P", "/", ing.default_backend, None)
    www = dict(options.www).get(host)
    if www is not None and rule_backend is not None:
        # ingress-nginx's redirect server: every request answers 308.
        url = "${scheme}://" + www + ":${server_port}${request_uri}"
        return [_Location("P", "/", rule_backend, None, answer=f"d.308.{b64(url)}")]
    return _ingress_nginx([*exact.values(), *other.values()], options)


def _ingress_nginx(locations: list[_Location], o: IngressOptions) -> list[_Location]:
    """ingress-nginx's rewrite-target, permanent/temporal redirect and app-root
    on an Ingress's locations (``ingress_nginx_paths``)."""
    out = []
    for loc in locations:
        if o.redirect is not None:
            code, url = o.redirect
            loc = replace(loc, answer=f"d.{code}.{b64(url)}")
        elif o.rewrite_target is not None and loc.path.lstrip("^") != o.rewrite_target:
            # ingress-nginx leaves a path equal to its target as it is. A
            # regex path is matched as the location is (ingress-nginx's
            # "(?i)<path>", NIC's "^<path>" or "(?i)^<path>"); any other
            # path matches the URI it took, which becomes the target.
            loc = replace(
                loc,
                rewrite=o.rewrite_target,
                caseless=loc.modifier == "I",
                whole=loc.modifier not in ("I", "X"),
                proxies=False,
            )
        out.append(loc)
    if o.app_root is not None and out:
        # ingress-nginx's "if ($uri = /) { return 302 $scheme://$http_host<root>; }"
        # in the location that takes "/": an exact location wins over all others.
        url = "${scheme}://${http_host}" + o.app_root
        root = _Location("E", "/", out[0].backend, None, answer=f"d.302.{b64(url)}")
        out = [root, *(loc for loc in out if (loc.modifier, loc.path) != ("E", "/"))]
    return out


def _custom_errors(errors: tuple[str, tuple[int, ...]]) -> list[str]:
    name, codes = errors
    return [",".join(str(c) for c in codes), b64(name)]


def _upstream(
    key: BackendKey, tls: bool, o: IngressOptions, sticky: StickyCookie | None = None
) -> str:
    method = o.lb_method
    hash_key = ""
    if method.startswith("hash"):
        rest = method.removeprefix("hash").strip()
        consistent = rest.endswith("consistent")
        hash_key = rest.removesuffix("consistent").strip()
        balancing = "hc" if consistent else "h"
    else:
        balancing = _BALANCING.get(method, "rr")
    fields = ".".join(
        [
            "1" if tls else "0",
            str(o.max_conns) if o.max_conns else "-",
            "-" if o.client_max_body_size is None else str(o.client_max_body_size),
            str(o.next_upstream_timeout_ms) if o.next_upstream_timeout_ms else "-",
            "-" if o.keepalive is None else str(o.keepalive),
            # ingress-nginx's default-backend, and the codes it answers with
            # the Ingress's name (ferryman_vs_upstream.lua).
            *([b64(o.fallback)] if o.fallback else []),
            *(_custom_errors(o.custom_errors) if o.fallback and o.custom_errors else []),
        ]
    )
    return "|".join(
        [
            "U",
            key,
            balancing,
            str(o.max_fails),
            _seconds(o.fail_timeout_ms),
            _seconds(o.connect_timeout_ms),
            _seconds(o.read_timeout_ms),
            _seconds(o.send_timeout_ms),
            str(o.next_upstream_tries),
            b64(hash_key),
            fields,
            *([sticky_field(sticky)] if sticky else []),
        ]
    )


def basic_auth(ing: Ingress, options: IngressOptions, reads: PolicyReads) -> Attached:
    """``nginx.org/basic-auth-secret`` as a basicAuth Policy's configuration: a
    Secret missing, of another type or invalid makes every request answer 500."""
    name = options.basic_auth_secret
    if name is None:
        return NONE
    ns = ing.meta.namespace
    read = reads.secret_read(ns, name, parse_htpasswd_secret)
    if read.value is None or read.secret_type != HTPASSWD_TYPE:
        why = read.error or f"secret is of type {read.secret_type!r}, not {HTPASSWD_TYPE!r}"
        message = f"basic auth secret {ns}/{name} is invalid: {why}; requests answer 500"
        return Attached({}, (message,), True)
    assert isinstance(read.value, Htpasswd)
    refused = tuple(f"basic auth secret {ns}/{name}: htpasswd {w}" for w in read.value.refused)
    return Attached({Basic: Basic(options.basic_auth_realm, read.value.content)}, refused)


def combined(a: Attached, b: Attached) -> Attached:
    if a.error or b.error:
        return Attached({}, (*a.warnings, *b.warnings), True)
    configs: dict[type[Enforced], Enforced] = {**a.configs, **b.configs}
    return Attached(configs, (*a.warnings, *b.warnings))


@dataclass(frozen=True)
class Part:
    """An Ingress whose paths for the host are served, with its own options and
    the policies its routes enforce (a mergeable master's minions are parts)."""

    ing: Ingress
    options: IngressOptions
    policies: Attached
    # The paths a canary joins (ingress-nginx's), (path, pathType) -> the canary
    # (canary_host.py).
    canaries: Mapping[tuple[str, str], Joined] = field(default_factory=dict)


@dataclass(frozen=True)
class Routing:
    host: VirtualHost  # the stub H record's
    record: str  # the V record
    backends: frozenset[BackendKey]
    fast: str | None  # the F record (``vs_fast``'s grammar), None: the module serves none


def _fast_options(o: IngressOptions) -> bool:
    """Whether the module proxies as the slow path would with these options
    (``vs_fast``: round-robin or least_conn, max_fails, fail_timeout, the three
    timeouts, next-upstream-tries; nothing else)."""
    return o == replace(
        IngressOptions(),
        connect_timeout_ms=o.connect_timeout_ms,
        read_timeout_ms=o.read_timeout_ms,
        send_timeout_ms=o.send_timeout_ms,
        ssl_redirect=o.ssl_redirect,
        lb_method=o.lb_method if o.lb_method in ("round_robin", "least_conn") else "",
        max_fails=o.max_fails,
        fail_timeout_ms=o.fail_timeout_ms,
        next_upstream_tries=o.next_upstream_tries,
        path_regex=o.path_regex,
        rewrite_target=o.rewrite_target,  # the location's (_module_rewrite)
        websocket_services=o.websocket_services,
        use_cluster_ip=o.use_cluster_ip,
    )


def _module_rewrite(loc: _Location) -> str | None:
    """The F record's rewrite of ``loc`` (``ngx_http_ferryman_vs_rewrite.c``):
    empty for none, ``w <uri> `` when the URI becomes the target (its ``$<digit>``
    dropped, as ferryman_vs.lua's rewrite() drops them), ``r <target> `` when
    the location's regex is the rewrite's (anchored, caseless alike); None when
    the module would rewrite otherwise than the slow path (a prefix replaced,
    nginx.org/rewrites, or a URI left empty, which Lua answers 500)."""
    if loc.rewrite is None:
        return ""
    if loc.whole:
        uri = re.sub(r"\$[0-9]", "", loc.rewrite)
        return f"w {b64(uri)} " if uri else None
    regex = loc.modifier in ("X", "I") and loc.caseless == (loc.modifier == "I")
    if regex and loc.path.startswith("^"):
        return f"r {b64(loc.rewrite)} "
    return None


def _fast_upstream(key: BackendKey, o: IngressOptions) -> str:
    return " ".join(
        [
            "u",
            base64.b64encode(key.encode()).decode("ascii"),
            "1" if o.lb_method == "least_conn" else "0",
            str(o.max_fails),
            str(o.fail_timeout_ms),
            str(o.connect_timeout_ms or 0),
            str(o.read_timeout_ms or 0),
            str(o.send_timeout_ms or 0),
            str(o.next_upstream_tries),
        ]
    )


class _Upstreams:
    """The V record's U items and the F record's, numbered from 1 alike."""

    def __init__(self) -> None:
        self._numbers: dict[str, int] = {}
        self.lines: list[str] = []
        self.fast_items: list[str] = []

    def number(self, line: str, key: BackendKey, o: IngressOptions) -> int:
        if line not in self._numbers:
            self._numbers[line] = len(self._numbers) + 1
            self.lines.append(line)
            self.fast_items.append(_fast_upstream(key, o))
        return self._numbers[line]


def ingress_vs_routing(
    parts: list[Part],
    vh: VirtualHost,
    host: str,
    server: IngressOptions,
    spec: Attached,
) -> Routing:
    """The stub H record's host, the V record, the backends it proxies to and the
    F record; ``server``: the host's own options (redirects, HSTS, server tokens),
    ``spec`` the policies of requests no path takes."""
    items = PolicyItems()
    ups = _Upstreams()
    routes: list[str] = []
    keys: set[BackendKey] = set()
    # The F record: the module serves the routes whose options it has, when the
    # host asks for nothing its own answers would lack (HSTS, server tokens,
    # redirect-to-https, policies of unmatched requests).
    fast_locations: list[str] = []
    # The module checks an accessControl (ingress-nginx's source-range lists)
    # on the routes it serves; the requests no path takes, the slow path's
    # (no "g" item: they go there as before).
    host_fast = (
        server.hsts is None
        and not server.server_tokens
        and not server.redirect_to_https
        and server.force_ssl_redirect is None
        and ((not spec.configs and not spec.error) or module_access(spec) is not None)
    )
    for part in parts:
        o = part.options
        enforced = items.reference(part.policies)
        access = module_access(part.policies) if enforced else None
        kind = f"a {access} f" if access is not None else "f"
        hide = "^".join(b64(n) for n in o.hide_headers)
        passed = "^".join(b64(n) for n in o.pass_headers)
        set_headers = "^".join(f"{b64(n)}~{b64(v)}" for n, v in o.set_headers)
        add = "^".join(f"{b64(n)}~{b64(v)}~{int(a)}" for n, v, a in o.add_headers)
        redirect = _proxy_redirect(o)
        for loc in _locations(part.ing, host, o):
            if loc.answer is not None:
                head = f"l {loc.modifier} {b64(loc.path)} 0"
                fast_locations.append(f"{head} s")
                fields = ["R", loc.modifier, b64(loc.path), "0", "", f"100:{loc.answer}", ""]
                routes.append("|".join([*fields, enforced]))
                continue
            key = backend_key(part.ing.meta.namespace, loc.backend.service, loc.backend.port_ref)
            key += CLUSTER_IP if o.use_cluster_ip else ""
            keys.add(key)
            if o.fallback:
                keys.add(BackendKey(o.fallback))
            tls = loc.backend.service in o.ssl_services
            number = ups.number(_upstream(key, tls, o, o.sticky.get(loc.backend.service)), key, o)
            joined = part.canaries.get(loc.source) if loc.source is not None else None
            rewrite = b64(loc.rewrite) if loc.rewrite is not None else ""
            # The action less its upstream's number.
            tail = f".{rewrite}.{set_headers}.{add}.{hide}..{passed}."
            if redirect:
                tail += "." + redirect  # the tenth field, after the ignored headers
            action = f"p.{number}{tail}"
            matches, default = "", f"100:{action}"
            program = f"0 1 100 {number}"
            if joined is not None:
                # The canary's backend proxied as the main's path is: the main's
                # annotations apply to both (ingress-nginx's alternative backend).
                b = joined.backend
                other = backend_key(joined.namespace, b.service, b.port_ref)
                other += CLUSTER_IP if o.use_cluster_ip else ""
                keys.add(other)
                canary = ups.number(_upstream(other, tls, o), other, o)
                to_canary = f"p.{canary}{tail}"
                matches, default = canary_route_fields(joined.canary, action, to_canary)
                program = canary_module_fields(joined.canary, number, canary)
            module_rewrite = _module_rewrite(loc)
            served = (
                _fast_options(o)
                and (not enforced or access is not None)
                and module_rewrite is not None
                and loc.backend.service not in o.ssl_services
            )
            head = f"l {loc.modifier} {b64(loc.path)} {int(loc.proxies)}"
            fast_locations.append(
                f"{head} {module_rewrite}{kind} {program}" if served else f"{head} s"
            )
            proxies = "1" if loc.proxies else "0"
            fields = ["R", loc.modifier, b64(loc.path), proxies, matches, default, "", enforced]
            flags = "g" if loc.backend.service in o.grpc_services else ""
            flags += "" if o.proxy_buffering else "u"
            flags += "" if o.buffer_tier is None else f"b{o.buffer_tier}"
            flags += "i" if loc.caseless else ""
            flags += "w" if loc.whole else ""
            flags += "" if o.request_buffering else "s"
            if flags:
                fields.append(flags)
            routes.append("|".join(fields))
    redirect = f"{server.redirect_code}:i" if server.redirect_to_https else "-"
    if not server.redirect_to_https and server.force_ssl_redirect is not None:
        # ingress-nginx's force-ssl-redirect: 308 (its http-redirect-code) by the scheme.
        redirect = "308:s" if server.force_ssl_redirect else "308:t"
    hsts = b64(server.hsts) if server.hsts else ""
    opts = f"O|{hsts}|{int(server.hsts_behind_proxy)}|{int(server.server_tokens)}"
    unmatched = items.reference(spec, route_only=frozenset("c"))
    record_spec = ["S|" + unmatched] if unmatched else []
    record = " ".join([redirect, *ups.lines, *routes, opts, *items.items, *record_spec])
    stub = replace(vh, routes=(), default_backend=None)
    fast = None
    if host_fast and any(not loc.endswith(" s") for loc in fast_locations):
        fast = " ".join(["1", *ups.fast_items, *fast_locations])
    return Routing(stub, record, frozenset(keys) | frozenset(items.backends), fast)
