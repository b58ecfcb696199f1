"""ingress-nginx's access annotations as the Policies that say the same.

``whitelist-source-range`` (``allowlist-source-range``) and
``denylist-source-range`` become one accessControl configuration, ``enable-cors``
and ``cors-*`` a cors one; the Ingress's routes enforce them as if an
``nginx.org/policies`` Policy said so (``kinds/ingress/records/hosts.py``).

ingress-nginx writes ``deny <denied>; allow <allowed>; deny all;``: an address
in both lists is denied. NGINX's access list ends at the first match, and
ferryman's accessControl record is one list and one action, so the allowed
networks are written with the denied ones cut out of them (CIDR blocks nest
or are apart: ``address_exclude`` gives the exact remainder).
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from collections.abc import Mapping

from ferryman.kinds.ingress.parse import ingress_nginx_auth as auth_extras
from ferryman.kinds.policy.parse.cors import CORS, origin_problem
from ferryman.kinds.policy.parse.external_auth import ExternalAuth
from ferryman.kinds.policy.parse.policy import (
    TLS_PROTOCOLS,
    AccessControl,
    EgressMTLS,
    IngressMTLS,
)

PREFIX = "nginx.ingress.kubernetes.io/"

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class Refused(ValueError):
    """An access annotation's value that cannot be enforced as written; the
    Ingress is rejected rather than served more openly than asked."""


def _networks(annotations: Mapping[str, str], key: str) -> list[Network]:
    raw = annotations[PREFIX + key]
    out = []
    for part in raw.split(","):
        text = part.strip()
        if not text:
            continue
        try:
            out.append(ipaddress.ip_network(text, strict=False))
        except ValueError:
            raise Refused(f"{PREFIX}{key}: {text!r} is not an address or CIDR block") from None
    if not out:
        raise Refused(f"{PREFIX}{key}: names no address or CIDR block")
    return out


def _cut(allowed: list[Network], denied: list[Network]) -> list[Network]:
    """``allowed`` without ``denied``: what ``deny ...; allow ...; deny all`` lets in."""
    out = allowed
    for d in denied:
        kept: list[Network] = []
        for a in out:
            if a.version != d.version or not a.overlaps(d):
                kept.append(a)
            elif d.subnet_of(a):  # type: ignore[arg-type]
                kept.extend(a.address_exclude(d))  # type: ignore[arg-type]
            # else: a lies inside d, all of it denied
        out = kept
    return sorted(out, key=lambda n: (n.version, n.network_address, n.prefixlen))


ALLOW_KEYS = ("whitelist-source-range", "allowlist-source-range")
DENY_KEY = "denylist-source-range"


def access_control(annotations: Mapping[str, str]) -> AccessControl | None:
    """The client addresses let in (allow) or kept out (deny); None: no list set."""
    allowed: list[Network] = []
    for key in ALLOW_KEYS:
        if PREFIX + key in annotations:
            allowed += _networks(annotations, key)
    denied = _networks(annotations, DENY_KEY) if PREFIX + DENY_KEY in annotations else []
    if allowed:
        kept = _cut(allowed, denied)
        if not kept:
            raise Refused(
                f"{PREFIX}{DENY_KEY}: every allowed address is denied too: nothing would be served"
            )
        return AccessControl("allow", tuple(str(n) for n in kept))
    if denied:
        return AccessControl("deny", tuple(str(n) for n in denied))
    return None


# ingress-nginx's defaults (its cors annotation parser).
_METHODS = "GET, PUT, POST, DELETE, PATCH, OPTIONS"
_HEADERS = (
    "DNT,Keep-Alive,User-Agent,X-Requested-With,If-Modified-Since,Cache-Control,"
    "Content-Type,Range,Authorization"
)
_MAX_AGE = 1728000
_METHOD = re.compile(r"[A-Za-z]+")
_HEADER = re.compile(r"[A-Za-z0-9\-_]+|\*")


class CorsValue(ValueError):
    """A cors-* value ingress-nginx would replace by its default (and so does ferryman)."""


def _items(value: str, pattern: re.Pattern[str]) -> tuple[str, ...] | None:
    items = tuple(i.strip() for i in value.split(",") if i.strip())
    if not items or not all(pattern.fullmatch(i) for i in items):
        return None
    return items


def cors(annotations: Mapping[str, str]) -> tuple[CORS | None, list[str]]:
    """enable-cors with its cors-* settings (ingress-nginx's defaults for those
    unset or invalid, each invalid one named in a warning); None: not enabled."""
    if annotations.get(PREFIX + "enable-cors", "").strip().lower() != "true":
        return None, []
    warnings: list[str] = []

    def read(key: str) -> str | None:
        value = annotations.get(PREFIX + key)
        return value.strip() if value is not None else None

    def bad(key: str, default: object) -> None:
        warnings.append(
            f"annotation {PREFIX}{key}: {annotations[PREFIX + key]!r} is invalid: "
            f"ingress-nginx's default ({default}) is used"
        )

    origins: tuple[str, ...] = ("*",)
    if (raw := read("cors-allow-origin")) is not None:
        parsed = tuple(o.strip() for o in raw.split(",") if o.strip())
        if parsed and all(origin_problem(o) is None for o in parsed):
            origins = ("*",) if "*" in parsed else parsed
        else:
            bad("cors-allow-origin", "*")
    methods = _items(_METHODS, _METHOD)
    if (raw := read("cors-allow-methods")) is not None:
        if (m := _items(raw, _METHOD)) is not None:
            methods = tuple(x.upper() for x in m)
        else:
            bad("cors-allow-methods", _METHODS)
    headers = _items(_HEADERS, _HEADER)
    if (raw := read("cors-allow-headers")) is not None:
        if (h := _items(raw, _HEADER)) is not None:
            headers = h
        else:
            bad("cors-allow-headers", _HEADERS)
    expose: tuple[str, ...] = ()
    if (raw := read("cors-expose-headers")) is not None:
        if (e := _items(raw, _HEADER)) is not None:
            expose = e
        else:
            bad("cors-expose-headers", "none")
    credentials = True
    if (raw := read("cors-allow-credentials")) is not None:
        if raw.lower() in ("true", "false"):
            credentials = raw.lower() == "true"
        else:
            bad("cors-allow-credentials", "true")
    max_age = _MAX_AGE
    if (raw := read("cors-max-age")) is not None:
        if raw.isdigit() and len(raw) < 10:
            max_age = int(raw)
        else:
            bad("cors-max-age", _MAX_AGE)
    assert methods is not None and headers is not None
    return CORS(origins, methods, headers, credentials, expose, max_age), warnings


# proxy-ssl-secret first: the others are read with it.
PROXY_SSL = (
    "proxy-ssl-secret",
    "proxy-ssl-verify",
    "proxy-ssl-verify-depth",
    "proxy-ssl-name",
    "proxy-ssl-server-name",
    "proxy-ssl-protocols",
    "proxy-ssl-ciphers",
)
_SSL_NAME = re.compile(r"[A-Za-z0-9.\-]+")
# As the egressMTLS Policy's ciphers (kinds/policy/parse/policy.py).
_CIPHERS = re.compile(r"[A-Za-z0-9!:+@_.=-]{1,1024}")


def egress_tls(
    annotations: Mapping[str, str], namespace: str, warnings: list[str]
) -> EgressMTLS | None:
    """proxy-ssl-* as an egressMTLS configuration (TLS to the backend: its
    client certificate, the name sent as SNI and, with proxy-ssl-verify on,
    the backend's certificate verified against proxy-ssl-secret's ca.crt);
    None: none set. A verification that cannot be done as asked rejects the
    Ingress rather than serving it unverified."""
    if not any(PREFIX + k in annotations for k in PROXY_SSL):
        return None

    def read(key: str) -> str:
        return annotations.get(PREFIX + key, "").strip()

    secret = ""
    if raw := read("proxy-ssl-secret"):
        ns, _, name = raw.rpartition("/")
        if ns and ns != namespace:
            raise Refused(
                f"{PREFIX}proxy-ssl-secret: {raw!r}: ferryman reads the Secret in the "
                "Ingress's namespace only"
            )
        secret = name
    verify = read("proxy-ssl-verify").lower()
    if verify not in ("", "on", "off"):
        # ingress-nginx's default for a value it does not take.
        warnings.append(f"annotation {PREFIX}proxy-ssl-verify: {verify!r} is not on or off: off")
    if verify == "on" and not secret:
        raise Refused(
            f"{PREFIX}proxy-ssl-verify: on needs {PREFIX}proxy-ssl-secret, whose ca.crt the "
            "backend's certificate is verified against"
        )
    depth_text = read("proxy-ssl-verify-depth") or "1"
    if not depth_text.isdigit() or len(depth_text) > 3:
        raise Refused(f"{PREFIX}proxy-ssl-verify-depth: {depth_text!r} is not a whole number")
    ssl_name = read("proxy-ssl-name")
    if ssl_name and not _SSL_NAME.fullmatch(ssl_name):
        raise Refused(f"{PREFIX}proxy-ssl-name: {ssl_name!r} is not a host name")
    if verify == "on" and not ssl_name:
        # ingress-nginx checks $proxy_host, "upstream_balancer", which no certificate holds.
        warnings.append(
            f"annotation {PREFIX}proxy-ssl-verify: on without {PREFIX}proxy-ssl-name: no name "
            "is checked, so no certificate matches (502), as in ingress-nginx"
        )
    protocols = tuple(read("proxy-ssl-protocols").split())
    if unknown := [p for p in protocols if p not in TLS_PROTOCOLS]:
        raise Refused(f"{PREFIX}proxy-ssl-protocols: {unknown[0]!r} is not a TLS protocol")
    ciphers = read("proxy-ssl-ciphers")
    if ciphers and not _CIPHERS.fullmatch(ciphers):
        raise Refused(f"{PREFIX}proxy-ssl-ciphers: {ciphers[:80]!r} is not an OpenSSL cipher list")
    return EgressMTLS(
        tls_secret=secret,
        verify_server=verify == "on",
        # ingress-nginx's: 0 is its default, 1.
        verify_depth=int(depth_text) or 1,
        protocols=protocols,
        ciphers=ciphers,
        server_name=read("proxy-ssl-server-name").lower() == "on",
        ssl_name=ssl_name,
        trusted_in_tls_secret=verify == "on",
    )


# auth-url first: the others are read with it.
AUTH = (
    "auth-url",
    "auth-signin",
    "auth-signin-redirect-param",
    "auth-response-headers",
    "auth-method",
    *auth_extras.EXTRAS,
)
_AUTH_URL = re.compile(
    r"(https?)://([a-z0-9.\-]+)(?::([0-9]{1,5}))?(/[^\s?#$;{}\"'\\]*(?:\?[^\s#$;{}\"'\\]*)?)?"
)
_CLUSTER_SUFFIXES = (".svc.cluster.local", ".svc")
_LABEL = re.compile(r"[a-z]([a-z0-9\-]{0,61}[a-z0-9])?")
_HEADER_NAME = re.compile(r"[A-Za-z0-9\-_]+")
_SIGNIN = re.compile(r"(?:https?://|/)[^\s;{}\"'\\]*")
# The NGINX variables a sign-in URL may name (oauth2-proxy's documented
# https://$host/oauth2/start?rd=$escaped_request_uri), filled in per request.
SIGNIN_VARIABLES = frozenset(
    {"host", "http_host", "scheme", "pass_access_scheme", "request_uri", "escaped_request_uri"}
)
_VARIABLE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$")


def _service(host: str) -> tuple[str, str] | None:
    """``svc``, ``svc.ns``, ``svc.ns.svc`` or ``svc.ns.svc.cluster.local`` ->
    (name, namespace, "" for the Ingress's); None: not a cluster Service."""
    for suffix in _CLUSTER_SUFFIXES:
        if host.endswith(suffix):
            host = host.removesuffix(suffix)
            break
    else:
        if host.count(".") > 1:
            return None
    parts = host.split(".")
    if not all(_LABEL.fullmatch(p) for p in parts):
        return None
    return parts[0], parts[1] if len(parts) == 2 else ""


def external_auth(annotations: Mapping[str, str], warnings: list[str]) -> ExternalAuth | None:
    """auth-url (a cluster Service's URL) as an externalAuth configuration;
    None: not set. A URL ferryman cannot reach as a Service, or a setting it
    cannot honour, rejects the Ingress rather than serving it unauthenticated."""
    if PREFIX + "auth-url" not in annotations:
        for key in AUTH[1:5]:  # asking for authentication without a service: refused
            if PREFIX + key in annotations:
                raise Refused(f"{PREFIX}{key}: needs {PREFIX}auth-url")
        warnings.extend(
            f"annotation {PREFIX}{key}: not applied without {PREFIX}auth-url"
            for key in auth_extras.EXTRAS
            if PREFIX + key in annotations
        )
        return None

    def read(key: str) -> str:
        return annotations.get(PREFIX + key, "").strip()

    url = read("auth-url")
    m = _AUTH_URL.fullmatch(url)
    if m is None:
        raise Refused(
            f"{PREFIX}auth-url: {url!r}: must be http(s)://<service>[.<namespace>[.svc"
            "[.cluster.local]]][:port]/path (no query, no NGINX variables)"
        )
    scheme, host, port, path = m.groups()
    found = _service(host)
    if found is None:
        raise Refused(
            f"{PREFIX}auth-url: {url!r}: {host!r} is not a Service of the cluster "
            "(ferryman sends auth requests to Services only: deploy the auth service in the "
            "cluster)"
        )
    method = read("auth-method").upper()
    if method and method != "GET":
        raise Refused(f"{PREFIX}auth-method: {method!r}: ferryman's auth requests are GET only")
    signin = read("auth-signin")
    param = read("auth-signin-redirect-param") or "rd"
    if not _HEADER_NAME.fullmatch(param):
        raise Refused(f"{PREFIX}auth-signin-redirect-param: {param!r} is not a parameter name")
    if signin:
        signin, param = _signin(signin, param)
    headers = tuple(h.strip() for h in read("auth-response-headers").split(",") if h.strip())
    for h in headers:
        if not _HEADER_NAME.fullmatch(h):
            raise Refused(f"{PREFIX}auth-response-headers: {h!r} is not a header name")
    try:
        redirect = auth_extras.request_redirect(annotations, SIGNIN_VARIABLES)
    except auth_extras.Bad as b:
        raise Refused(f"{PREFIX}auth-request-redirect: {b}") from None
    cache_key, cache_valid = auth_extras.cache(annotations, warnings)
    auth_extras.keepalive(annotations, warnings)
    name, namespace = found
    default = 443 if scheme == "https" else 80
    return ExternalAuth(
        auth_uri=path or "/",
        service=name,
        service_namespace=namespace,
        ports=(int(port) if port else default,),
        signin_url=signin,
        ssl_enabled=scheme == "https",
        redirect_param=param,
        response_headers=headers,
        request_redirect=redirect,
        set_cookie=auth_extras.set_cookie(annotations, warnings),
        cache_key=cache_key,
        cache_valid=cache_valid,
        host_header=host,
    )


def _signin(signin: str, param: str) -> tuple[str, str]:
    """auth-signin with ``${name}`` for each variable, and the parameter the
    original URL is added as ("-": none, the URL names it already, as
    ingress-nginx's buildAuthSignURL)."""
    if not _SIGNIN.fullmatch(signin):
        raise Refused(f"{PREFIX}auth-signin: {signin!r} is not a URL")

    def variable(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name not in SIGNIN_VARIABLES:
            raise Refused(
                f"{PREFIX}auth-signin: {signin!r}: {m.group(0)!r} is not one of the variables "
                f"ferryman fills in (${', $'.join(sorted(SIGNIN_VARIABLES))})"
            )
        return "${" + name + "}"

    template = _VARIABLE.sub(variable, signin)
    query = urllib.parse.urlsplit(signin).query
    names = {k for k, v in urllib.parse.parse_qsl(query, keep_blank_values=False) if v}
    return template, "-" if param in names else param


# auth-tls-secret first: the others are read with it.
AUTH_TLS = (
    "auth-tls-secret",
    "auth-tls-verify-client",
    "auth-tls-verify-depth",
    "auth-tls-match-cn",
    "auth-tls-pass-certificate-to-upstream",
    "auth-tls-error-page",
)
_ERROR_PAGE = re.compile(r"(?:https?://[A-Za-z0-9.\-]+(?::[0-9]{1,5})?)?/[^\s\"'\\$;{}<>]{0,2000}")
_SECRET_NAME = re.compile(r"[a-z0-9]([a-z0-9.\-]{0,251}[a-z0-9])?")
_VERIFY = ("on", "off", "optional", "optional_no_ca")


def client_certs(
    annotations: Mapping[str, str], namespace: str, warnings: list[str]
) -> IngressMTLS | None:
    """auth-tls-* as an ingressMTLS configuration (the host's client
    certificates); None: auth-tls-secret not set. A value that cannot be
    enforced rejects the Ingress."""
    if PREFIX + "auth-tls-secret" not in annotations:
        for key in AUTH_TLS[1:4]:  # asking for checks without a CA: refused
            if PREFIX + key in annotations:
                raise Refused(f"{PREFIX}{key}: needs {PREFIX}auth-tls-secret")
        if PREFIX + "auth-tls-error-page" in annotations:
            warnings.append(
                f"annotation {PREFIX}auth-tls-error-page: not applied without "
                f"{PREFIX}auth-tls-secret"
            )
        return None

    def read(key: str) -> str:
        return annotations.get(PREFIX + key, "").strip()

    if read("auth-tls-match-cn"):
        # Ignored, any certificate of the CA would be let in.
        raise Refused(f"{PREFIX}auth-tls-match-cn: not implemented by ferryman yet")
    if read("auth-tls-pass-certificate-to-upstream").lower() == "true":
        # Ignored, the backend would get a client's own ssl-client-cert header.
        raise Refused(
            f"{PREFIX}auth-tls-pass-certificate-to-upstream: not implemented by ferryman yet"
        )
    raw = read("auth-tls-secret")
    ns, _, name = raw.rpartition("/")
    if ns and ns != namespace:
        raise Refused(
            f"{PREFIX}auth-tls-secret: {raw!r}: ferryman reads the Secret in the Ingress's "
            "namespace only"
        )
    if not _SECRET_NAME.fullmatch(name):
        raise Refused(f"{PREFIX}auth-tls-secret: {raw!r} is not a Secret name")
    verify = read("auth-tls-verify-client").lower() or "on"
    if verify not in _VERIFY:
        raise Refused(
            f"{PREFIX}auth-tls-verify-client: {verify!r}: must be one of {', '.join(_VERIFY)}"
        )
    depth_text = read("auth-tls-verify-depth") or "1"
    if not depth_text.isdigit() or len(depth_text) > 3:
        raise Refused(f"{PREFIX}auth-tls-verify-depth: {depth_text!r} is not a whole number")
    page = read("auth-tls-error-page")
    if page and not _ERROR_PAGE.fullmatch(page):
        # Not applied, the 400 stays: refused, so the page is not silently lost.
        raise Refused(
            f"{PREFIX}auth-tls-error-page: {page[:80]!r} is not a URL (http(s)://host/path "
            "or /path, no NGINX variables)"
        )
    return IngressMTLS(
        client_cert_secret=name,
        verify_client=verify,
        verify_depth=int(depth_text),
        error_page=page,
    )
