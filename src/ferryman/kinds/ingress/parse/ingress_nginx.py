"""ingress-nginx's ``nginx.ingress.kubernetes.io/*`` annotations, in ferryman's terms.

ingress-nginx reached end of life in March 2026 and its users' Ingresses are
full of its annotations. Most of them say what a ``nginx.org/*`` annotation
already says in other words (seconds without a unit, ``on``/``off``, a burst as
a multiplier), so they are translated into those before the Ingress is
parsed: one vocabulary downstream, NIC's validation, both fast paths, no
reload. What has no ``nginx.org/*`` equivalent yet is said in a Warning, never
silently dropped.

The rules (docs/ingress-nginx.md has the table):

- a ``nginx.org/*`` annotation the Ingress sets wins over the ingress-nginx
  one that would set it (ferryman's own vocabulary is the more precise), and a
  Warning names the one not applied;
- a value ingress-nginx would not take is not applied, with a Warning naming
  annotation, value and the form expected (ingress-nginx too ignores such a
  value and keeps its default; rejecting the Ingress would take a migrating
  cluster's traffic down for a typo);
- snippets (``configuration-snippet``, ``server-snippet``...) reject the
  Ingress, naming the replacement: a snippet can carry access rules, and
  serving without them would open what it closed; NGINX text written by
  users is the hole CVE-2025-1974 came through, so ferryman never takes it;
- an annotation ingress-nginx does not know (a typo ingress-nginx ignored
  silently) gets a Warning.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ferryman.kinds.ingress.parse import annotations as nginx_org
from ferryman.kinds.ingress.parse import ingress_nginx_access as access
from ferryman.kinds.ingress.parse import ingress_nginx_auth as auth_notes
from ferryman.kinds.ingress.parse import ingress_nginx_backend as fallback
from ferryman.kinds.ingress.parse import ingress_nginx_canary as canary
from ferryman.kinds.ingress.parse import ingress_nginx_convert as cv
from ferryman.kinds.ingress.parse import ingress_nginx_known as known
from ferryman.kinds.ingress.parse import ingress_nginx_limits as client
from ferryman.kinds.ingress.parse import ingress_nginx_passthrough as passthrough
from ferryman.kinds.ingress.parse import ingress_nginx_paths as path_rules
from ferryman.kinds.policy.parse.cors import CORS
from ferryman.kinds.policy.parse.external_auth import ExternalAuth
from ferryman.kinds.policy.parse.policy import AccessControl, EgressMTLS, IngressMTLS

PREFIX = "nginx.ingress.kubernetes.io/"
NGINX_ORG = "nginx.org/"


@dataclass
class Translated:
    """The annotations as ferryman reads them, and what to say about them."""

    annotations: dict[str, str]
    warnings: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # each rejects the Ingress
    # What the Ingress's routes enforce as Policies would (access lists, cors).
    policies: list[AccessControl | CORS | EgressMTLS | ExternalAuth | IngressMTLS] = field(
        default_factory=list
    )
    # What its paths answer beyond proxying (rewrite-target, app-root, redirects).
    paths: path_rules.Paths = field(default_factory=path_rules.Paths)
    limits: client.ClientLimits | None = None  # limit-connections, limit-allowlist
    fallback: str | None = None  # default-backend: a Service of the Ingress's namespace
    error_codes: tuple[int, ...] = ()  # custom-http-errors: what the fallback answers
    streamed: bool = False  # proxy-request-buffering: off
    passthrough: bool = False  # ssl-passthrough: true
    samesite_none_conditional: bool = False  # session-cookie-conditional-samesite-none


@dataclass(frozen=True)
class Entry:
    """How ferryman serves one ingress-nginx annotation (docs/ingress-nginx.md)."""

    status: str  # "served", "differs", "refused" or "not yet"
    note: str = ""  # the difference, the replacement, or what is missing
    convert: cv.Convert | None = None  # None: read with another annotation's entry
    # Annotations read only together with this one (their entries have no convert).
    reads: tuple[str, ...] = ()
    # An access control: a value that cannot be applied rejects the Ingress
    # instead of serving it more openly than asked.
    closed: bool = False


SERVED, DIFFERS, REFUSED, NOT_YET = "served", "differs", "refused", "not yet"


def _renamed(source: str, target: str) -> Entry:
    """The value unchanged, as nginx.org's ``target``."""
    return Entry(SERVED, f"as nginx.org/{target}", lambda a, _s: {target: cv.value(a, source)})


def _timed(source: str, target: str) -> Entry:
    return Entry(
        SERVED, f"as nginx.org/{target} (seconds)", lambda a, _s: {target: cv.seconds(a, source)}
    )


_SNIPPET = "NGINX text from users is never applied (CVE-2025-1974's class)"

ENTRIES: dict[str, Entry] = {
    # upstreams
    "proxy-connect-timeout": _timed("proxy-connect-timeout", "proxy-connect-timeout"),
    "proxy-send-timeout": _timed("proxy-send-timeout", "proxy-send-timeout"),
    "proxy-read-timeout": _timed("proxy-read-timeout", "proxy-read-timeout"),
    "proxy-next-upstream-timeout": _timed(
        "proxy-next-upstream-timeout", "proxy-next-upstream-timeout"
    ),
    "proxy-body-size": _renamed("proxy-body-size", "client-max-body-size"),
    "client-body-buffer-size": _renamed("client-body-buffer-size", "client-body-buffer-size"),
    "proxy-next-upstream": _renamed("proxy-next-upstream", "proxy-next-upstream"),
    "proxy-next-upstream-tries": _renamed("proxy-next-upstream-tries", "proxy-next-upstream-tries"),
    "proxy-max-temp-file-size": _renamed("proxy-max-temp-file-size", "proxy-max-temp-file-size"),
    "proxy-busy-buffers-size": _renamed("proxy-busy-buffers-size", "proxy-busy-buffers-size"),
    "proxy-redirect-from": Entry(
        SERVED, "with proxy-redirect-to, as nginx.org's", cv.redirect, ("proxy-redirect-to",)
    ),
    "proxy-buffering": Entry(SERVED, "as nginx.org/proxy-buffering", cv.on_off),
    "proxy-buffer-size": Entry(
        SERVED,
        "as nginx.org/proxy-buffer-size and proxy-buffers (<number> <size>, as ingress-nginx)",
        cv.buffers,
        ("proxy-buffers-number",),
    ),
    "proxy-buffers-number": Entry(SERVED, "with proxy-buffer-size", cv.buffers),
    "load-balance": Entry(DIFFERS, "ewma is served as least_conn", cv.load_balance),
    "upstream-hash-by": Entry(SERVED, "as nginx.org/lb-method: hash <key> consistent", cv.hash_by),
    "service-upstream": Entry(SERVED, "as nginx.org/use-cluster-ip", cv.service_upstream),
    "backend-protocol": Entry(
        SERVED,
        "HTTPS, GRPC, GRPCS as nginx.org/ssl-services and grpc-services for every Service "
        "of the Ingress (GRPC needs the ConfigMap's http2, as NIC); AUTO_HTTP and FCGI refused",
        cv.backend_protocol,
    ),
    "affinity": Entry(SERVED, cv.AFFINITY_NOTE, cv.affinity, cv.AFFINITY_READS),
    "session-cookie-change-on-failure": Entry(DIFFERS, cv.CHANGE_ON_FAILURE_NOTE),
    # headers
    "upstream-vhost": Entry(
        SERVED, "as nginx.org/proxy-set-headers: Host", cv.header("Host", "upstream-vhost")
    ),
    "x-forwarded-prefix": Entry(
        SERVED,
        "as nginx.org/proxy-set-headers: X-Forwarded-Prefix",
        cv.header("X-Forwarded-Prefix", "x-forwarded-prefix"),
    ),
    "connection-proxy-header": Entry(
        SERVED,
        "as nginx.org/proxy-set-headers: Connection (also for WebSocket upgrades, as "
        "ingress-nginx)",
        cv.header("Connection", "connection-proxy-header"),
    ),
    "proxy-http-version": Entry(
        DIFFERS, '"1.1" (the default) is served; "1.0" is not, in a Warning', cv.http_version
    ),
    "proxy-request-buffering": Entry(
        SERVED, "on (the default) or off: the body proxied as it arrives, on the Lua slow path"
    ),
    "default-backend": Entry(
        DIFFERS,
        "a Service of the Ingress's namespace (its first port) serving the Ingress's "
        "requests while a path's Service has no endpoint, on the Lua slow path; and the "
        "error responses custom-http-errors lists",
    ),
    "custom-http-errors": Entry(
        DIFFERS,
        "codes 400-599 of the upstream's or NGINX's responses answered by the "
        "default-backend annotation's Service (required: ferryman has no controller-wide "
        "default backend), asked GET / with ingress-nginx's X-Code, X-Format, "
        "X-Original-URI, X-Namespace, X-Ingress-Name, X-Service-Name, X-Service-Port and "
        "X-Request-ID; its answer is the client's; no reload",
    ),
    # paths and redirects
    "use-regex": Entry(
        DIFFERS,
        'as nginx.org/path-regex: case_insensitive (~* "^<path>", NIC\'s checks on the '
        "regex); Exact paths stay exact; applies to the Ingress's own paths, not to every "
        "Ingress of the host as ingress-nginx",
        cv.regex,
        ("rewrite-target",),
    ),
    "rewrite-target": Entry(
        SERVED,
        'the URI sent upstream as rewrite "(?i)<path>" <target> break ($1...$9; makes '
        "the paths regexes as use-regex); a target with other variables or a query "
        "string is not applied",
        cv.regex,
    ),
    "app-root": Entry(SERVED, "a request for / answers 302 to $scheme://$http_host<app-root>"),
    "temporal-redirect": Entry(
        SERVED,
        "every path answers the redirect (temporal-redirect-code, 302 by default; wins over "
        "permanent-redirect); variables $scheme, $host, $request_uri, $uri, "
        "$http_x_forwarded_proto; codes 301, 302, 303, 307, 308",
        reads=("temporal-redirect-code",),
    ),
    "permanent-redirect": Entry(
        SERVED,
        "as temporal-redirect (permanent-redirect-code, 301 by default)",
        reads=("permanent-redirect-code",),
    ),
    "ssl-redirect": Entry(SERVED, "as nginx.org/ssl-redirect", cv.ssl_redirect),
    "force-ssl-redirect": Entry(
        SERVED,
        "a request over http answers 308 to https://$host$request_uri (TLS on the Ingress or "
        "not; by the scheme, not X-Forwarded-Proto); nginx.org/redirect-to-https wins",
        reads=("preserve-trailing-slash",),
    ),
    "from-to-www-redirect": Entry(
        DIFFERS,
        "www.<host> (or <host> of a www. rule) answers 308 to "
        "$scheme://<host>:$server_port$request_uri, when the Ingress does not route that "
        "name itself (the name is claimed as a host: the oldest owner wins, reported); the "
        "request URI's trailing slash is kept (ingress-nginx drops it)",
    ),
    "server-alias": Entry(
        DIFFERS,
        "each name routes as the Ingress's first host (a rule of its own); TLS for a name "
        "only when spec.tls lists it; a name another resource owns stays the oldest's "
        "(reported), as a host of a rule",
    ),
    "preserve-trailing-slash": Entry(
        SERVED, "with force-ssl-redirect: the trailing slash kept (dropped by default)"
    ),
    # access
    "limit-rps": Entry(
        SERVED,
        "as nginx.org/limit-req-*: per client address, burst rate x limit-burst-multiplier "
        "without delay, 503 beyond (both limit-rps and limit-rpm: limit-rps)",
        cv.limits,
        ("limit-burst-multiplier",),
    ),
    "limit-rpm": Entry(SERVED, "as limit-rps, per minute", cv.limits, ("limit-burst-multiplier",)),
    "limit-connections": Entry(
        SERVED,
        "the requests of one client address served at once, over the Ingress's paths, 503 "
        "beyond (limit_conn's; HTTP/2 streams count each); on the Lua slow path, as limit-rps",
    ),
    "limit-allowlist": Entry(
        SERVED,
        "addresses no limit-rps, limit-rpm or limit-connections applies to (an invalid "
        "address: not applied, every client limited, in a Warning)",
        reads=client.LIMITS,
    ),
    "limit-whitelist": Entry(
        SERVED, "as limit-allowlist (which wins when both are set)", reads=client.WHITELIST_READS
    ),
    "whitelist-source-range": Entry(
        SERVED,
        "as an accessControl Policy (403; checked by the C module on the routes it serves); "
        "an invalid address rejects the Ingress",
        reads=("allowlist-source-range",),
    ),
    "allowlist-source-range": Entry(SERVED, "as whitelist-source-range"),
    "denylist-source-range": Entry(
        SERVED,
        "as an accessControl Policy (403); with an allow list, the denied addresses are cut "
        "out of it (deny first, as ingress-nginx)",
    ),
    "enable-cors": Entry(
        SERVED,
        "as a cors Policy with ingress-nginx's defaults (preflight 204; Vary: Origin when "
        "origins are listed)",
        reads=(
            "cors-allow-origin",
            "cors-allow-methods",
            "cors-allow-headers",
            "cors-expose-headers",
            "cors-allow-credentials",
            "cors-max-age",
        ),
    ),
    "proxy-ssl-secret": Entry(
        DIFFERS,
        "as an egressMTLS Policy: the client certificate (tls.crt/tls.key; the Secret must "
        "be of type kubernetes.io/tls, in the Ingress's namespace), proxy-ssl-name and "
        "proxy-ssl-server-name, proxy-ssl-protocols and proxy-ssl-ciphers; proxy-ssl-verify "
        "on verifies the backend against the Secret's ca.crt to proxy-ssl-verify-depth "
        "(applied per request, no reload); verify on without ca.crt answers 500 (ingress-"
        "nginx would proxy unverified), without proxy-ssl-secret rejects the Ingress",
        reads=access.PROXY_SSL[1:],
    ),
    "auth-type": Entry(
        DIFFERS,
        "basic, as nginx.org/basic-auth-secret: the Secret must be of type nginx.org/htpasswd "
        "with key htpasswd, in the Ingress's namespace (ferryman does not watch Opaque "
        "Secrets); anything else rejects the Ingress",
        cv.basic_auth,
        ("auth-secret", "auth-secret-type", "auth-realm"),
        closed=True,
    ),
    "auth-url": Entry(
        DIFFERS,
        auth_notes.AUTH_URL,
        reads=access.AUTH[1:],
        closed=True,
    ),
    "auth-tls-secret": Entry(
        DIFFERS,
        "as an ingressMTLS Policy (client certificates checked at the handshake, by SNI): "
        "the Secret must be of type nginx.org/ca with key ca.crt, in the Ingress's namespace "
        "(ferryman does not watch Opaque Secrets), and the Ingress must have TLS (else its "
        "hosts answer 500); auth-tls-verify-client on/off/optional/optional_no_ca and "
        "auth-tls-verify-depth as NGINX's; auth-tls-match-cn and "
        "auth-tls-pass-certificate-to-upstream true are not implemented and reject the "
        "Ingress (served without them, a certificate of another CN or a client's own "
        "ssl-client-cert header would reach the backend); auth-tls-error-page: a missing or "
        "refused certificate answered 302 to it (http(s)://host/path or /path; another "
        "value rejects the Ingress); anything else rejects the Ingress",
        reads=access.AUTH_TLS[1:],
        closed=True,
    ),
    "ssl-passthrough": Entry(
        DIFFERS,
        "with --enable-ssl-passthrough (an alias of --enable-tls-passthrough; without it "
        "TLS is ended, in a Warning): connections on the HTTPS port with a host's SNI name go "
        "undecrypted to the backend of its / path (or defaultBackend), in the SNI table "
        "TransportServers share (no reload); the HTTP port serves the Ingress as without it; "
        "a host a TransportServer passes through too is the oldest's (reported); not a "
        "host-less rule, nor server-alias names",
    ),
    # canary (parse/ingress_nginx_canary.py, records/canary_host.py)
    "canary": Entry(
        DIFFERS,
        "the Ingress's paths join those of the same host, path and pathType of the main Ingress "
        "(the host's owner, same class): header, then cookie, then weight decide per "
        "request, as ingress-nginx; one canary per path (the oldest), a canary without a "
        "main is not served (both in a Warning); its other annotations are ignored (the "
        "main's apply: load-balance and affinity too, said in a Warning); the weight is "
        "served in whole percent (rounded, said); not on a mergeable host",
        reads=canary.READS,
    ),
    "auth-proxy-set-headers": Entry(REFUSED, auth_notes.PROXY_SET_HEADERS),
    # snippets
    **{
        key: Entry(REFUSED, f"{_SNIPPET}; {replacement}")
        for key, replacement in {
            "configuration-snippet": "headers: nginx.org/proxy-set-headers, add-header; "
            "access: a Policy (nginx.org/policies)",
            "server-snippet": "nginx.org/* annotations and Policies (nginx.org/policies)",
            "auth-snippet": "auth-url's auth-response-headers, or an externalAuth Policy",
            "modsecurity-snippet": "no WAF in ferryman: put one in front",
            "stream-snippet": "a TransportServer",
        }.items()
    },
}
# Read with the entry that names them.
for _entry in list(ENTRIES.values()):
    for _key in _entry.reads:
        ENTRIES.setdefault(_key, Entry(_entry.status, "read with its group"))

# Every other annotation ingress-nginx reads: known, not applied yet, said in a Warning.
KNOWN_NOT_YET = known.ANNOTATIONS - ENTRIES.keys()


def entry(key: str) -> Entry | None:
    """How ferryman serves ``nginx.ingress.kubernetes.io/<key>``; None: not ingress-nginx's."""
    if key in ENTRIES:
        return ENTRIES[key]
    if key in KNOWN_NOT_YET:
        return Entry(NOT_YET, "not applied by ferryman yet")
    return None


def translate(annotations: Mapping[str, str], spec: Any, namespace: str = "") -> Translated:
    """``annotations`` with each ingress-nginx one the Ingress sets added as the
    ``nginx.org/*`` annotations of the same meaning, and what to say."""
    out = Translated(dict(annotations))
    ours = sorted(k.removeprefix(PREFIX) for k in annotations if k.startswith(PREFIX))
    if not ours:
        return out
    services = cv.raw_services(spec)
    done: set[int] = set()
    for key in ours:
        name = PREFIX + key
        e = entry(key)
        if e is None:
            out.warnings.append(
                f"annotation {name} is not an ingress-nginx annotation (misspelt?): ignored"
            )
            continue
        if e.status == REFUSED:
            out.problems.append(f"annotations.{name}: refused: {e.note}")
            continue
        if e.status == NOT_YET:
            out.warnings.append(f"annotation {name} is not applied by ferryman yet: ignored")
            continue
        if e.convert is None or id(e.convert) in done:
            continue
        done.add(id(e.convert))
        _apply(out, name, e, annotations, services)
    # Access annotations: a value that cannot be enforced rejects the Ingress.
    reads = (
        (lambda: access.access_control(annotations), ", so as not to serve more openly"),
        (lambda: access.egress_tls(annotations, namespace, out.warnings), ""),
        (
            lambda: access.external_auth(annotations, out.warnings),
            ", so as not to serve unauthenticated",
        ),
        (
            lambda: access.client_certs(annotations, namespace, out.warnings),
            ", so as not to serve unverified",
        ),
    )
    for read, why in reads:
        try:
            if (policy := read()) is not None:
                out.policies.append(policy)
        except access.Refused as r:
            out.problems.append(f"annotations.{r}: refused{why}")
    out.paths = path_rules.paths(annotations, out.warnings, spec)
    out.limits = client.client_limits(annotations, out.warnings)
    out.fallback = fallback.fallback_service(annotations, out.warnings)
    out.error_codes = fallback.error_codes(annotations, out.fallback, out.warnings)
    out.streamed = cv.request_streamed(annotations, out.warnings)
    out.passthrough = passthrough.ssl_passthrough(annotations, out.warnings)
    out.samesite_none_conditional = cv.affinity_extras(annotations, out.warnings)
    cors, warned = access.cors(annotations)
    out.warnings += warned
    if cors is not None:
        out.policies.append(cors)
    return out


def _apply(
    out: Translated,
    name: str,
    e: Entry,
    annotations: Mapping[str, str],
    services: frozenset[str],
) -> None:
    assert e.convert is not None
    try:
        result = e.convert(annotations, services)
    except cv.Unusable as u:
        value = annotations[name]
        if e.closed:
            out.problems.append(f"annotations.{name}: Invalid value: {value!r}: {u}")
        else:
            out.warnings.append(f"annotation {name}: {value!r} {u}: not applied")
        return
    except cv.Differs as d:
        result = d.result
        out.warnings.append(f"annotation {name}: {d}")
    produced = {NGINX_ORG + k: v for k, v in result.items()}
    _, problems, _ = nginx_org.validate(produced, services, hostless=False)
    if problems:
        detail = problems[0].detail or problems[0].kind
        if e.closed:
            out.problems.append(
                f"annotations.{name}: Invalid value: {annotations[name]!r}: {detail}"
            )
        else:
            out.warnings.append(f"annotation {name}: {annotations[name]!r}: {detail}: not applied")
        return
    for key, value in result.items():
        target = NGINX_ORG + key
        if key == "proxy-set-headers" and target in out.annotations:
            merged = _merge_headers(out.annotations[target], value)
            if merged == out.annotations[target]:
                out.warnings.append(f"annotation {name} is not applied: {target} sets that header")
            out.annotations[target] = merged
        elif target in annotations:
            out.warnings.append(f"annotation {name} is not applied: {target} is set and wins")
        else:
            out.annotations[target] = value


def _merge_headers(set_: str, added: str) -> str:
    """proxy-set-headers with ``added`` unless it names a header already set
    (the nginx.org annotation's, or an earlier ingress-nginx one's, wins)."""
    names = {h.partition(":")[0].strip().lower() for h in set_.split(",")}
    if added.partition(":")[0].strip().lower() in names:
        return set_
    return f"{set_},{added}"
