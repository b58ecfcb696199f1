"""k8s.nginx.org/v1 Policy: typed view and NIC's validation.

A Policy holds exactly one policy. ferryman parses the ones issue 15 builds
(accessControl, rateLimit, basicAuth, apiKey, ingressMTLS, egressMTLS, jwt with
keys from a Secret, cors, externalAuth) and refuses the others by name with its reason,
rather than accept a Policy it would not enforce. Parsed and validated only:
the controller does not apply Policies yet.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ferryman.kinds.policy.parse.cors import CORS, CORS_KEYS, parse_cors
from ferryman.kinds.policy.parse.external_auth import (
    EXTERNAL_AUTH_KEYS,
    ExternalAuth,
    parse_external_auth,
)
from ferryman.kinds.policy.parse.rate_limit import RateLimit, parse_rate_limit
from ferryman.resources import nic_rules as rules
from ferryman.resources.meta import Meta
from ferryman.resources.nic_fields import (
    Context,
    Obj,
    Parsed,
    forbidden,
    invalid,
    not_supported,
    parse_object_meta,
    required,
)

KIND = "Policy"
SUPPORTED = (
    "accessControl",
    "rateLimit",
    "jwt",
    "basicAuth",
    "ingressMTLS",
    "egressMTLS",
    "apiKey",
    "cors",
    "externalAuth",
)
# NIC's policies ferryman does not offer, and why (docs/virtualserver.md says the same).
NOT_SUPPORTED = {
    "oidc": "OpenID Connect needs NGINX Plus's key-value store and NIC's njs login flow "
    "(NIC too offers it only with NGINX Plus)",
    "waf": "NGINX App Protect WAF is a commercial NGINX Plus module",
    "cache": "response caching is not implemented",
    "hsts": "the HSTS policy is not implemented",
}
SPEC_KEYS = frozenset({"ingressClassName", *SUPPORTED, *NOT_SUPPORTED})
_EXACTLY_ONE = (
    "must specify exactly one of: `accessControl`, `rateLimit`, `ingressMTLS`, `egressMTLS`, "
    "`basicAuth`, `apiKey`, `cache`, `cors`, `externalAuth`, `hsts`, `jwt`"
)
VERIFY_CLIENT = ("on", "off", "optional", "optional_no_ca")
TLS_PROTOCOLS = ("SSLv2", "SSLv3", "TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3")


@dataclass(frozen=True)
class AccessControl:
    action: str  # "allow" or "deny"
    networks: tuple[str, ...]  # addresses and CIDRs as written


@dataclass(frozen=True)
class JWT:
    realm: str
    secret: str  # a Secret of type nginx.org/jwk holding the keys
    token: str = (
        ""  # where the token is: $http_..., $arg_... or $cookie_...; "" the Authorization header
    )


@dataclass(frozen=True)
class BasicAuth:
    secret: str  # a Secret of type nginx.org/htpasswd
    realm: str = ""


@dataclass(frozen=True)
class APIKey:
    headers: tuple[str, ...]
    queries: tuple[str, ...]
    client_secret: str  # a Secret of type nginx.org/apikey


@dataclass(frozen=True)
class IngressMTLS:
    client_cert_secret: str  # a Secret of type nginx.org/ca
    verify_client: str = "on"
    verify_depth: int = 1
    # ingress-nginx's auth-tls-error-page (no Policy field sets it): a request
    # whose certificate is missing or refused is answered 302 to this URL.
    error_page: str = ""


@dataclass(frozen=True)
class EgressMTLS:
    tls_secret: str = ""
    trusted_cert_secret: str = ""
    verify_server: bool = False
    verify_depth: int = 1
    protocols: tuple[str, ...] = ()
    ciphers: str = ""
    session_reuse: bool = True
    server_name: bool = False
    ssl_name: str = ""
    # ingress-nginx's proxy-ssl-secret (never a Policy's): the CAs verifying
    # the server are the ca.crt of tls_secret, a kubernetes.io/tls Secret.
    trusted_in_tls_secret: bool = False


PolicyKind = (
    AccessControl | RateLimit | JWT | BasicAuth | APIKey | IngressMTLS | EgressMTLS | CORS
) | ExternalAuth


@dataclass(frozen=True)
class Policy:
    meta: Meta
    ingress_class: str
    policy: PolicyKind


def parse_policy(obj: Mapping[str, Any], context: Context | None = None) -> Parsed[Policy]:
    """Validate a raw Policy as NIC does: the model, or None and every problem."""
    ctx = context or Context()  # a test passes its own to see which fields are read
    meta = parse_object_meta(obj, ctx)
    spec = Obj.root(ctx, obj.get("spec"), "spec", SPEC_KEYS)
    if spec is None or meta is None:
        return Parsed(None, tuple(ctx.problems))
    ingress_class = spec.text("ingressClassName")
    found: list[PolicyKind | None] = []
    for key, reason in NOT_SUPPORTED.items():
        if spec.has(key):
            ctx.add(not_supported(spec.at(key), reason))
            found.append(None)
    for key in SUPPORTED:
        if spec.has(key):
            found.append(_PARSERS[key](spec))
    if len(found) != 1:
        ctx.add(invalid("spec", "", _EXACTLY_ONE))
    if ctx.problems or found[0] is None:
        return Parsed(None, tuple(ctx.problems))
    return Parsed(Policy(meta, ingress_class, found[0]), ())


def _secret(o: Obj, key: str, *, needed: bool = True) -> str:
    name = o.text(key)
    if not name:
        if needed:
            o.ctx.add(required(o.at(key)))
        return name
    o.ctx.extend([invalid(o.at(key), name, m) for m in rules.dns1123_subdomain(name)])
    return name


def _access_control(spec: Obj) -> AccessControl | None:
    a = spec.obj("accessControl", frozenset({"allow", "deny"}))
    if a is None:
        return None
    lists = [(k, items) for k in ("allow", "deny") if (items := a.str_items(k)) is not None]
    for _, items in lists:
        for where, value in items:
            if not rules.ip_or_cidr(value):
                a.ctx.add(invalid(where, value, "must be a CIDR or IP"))
    if len(lists) != 1:
        a.ctx.add(invalid(a.path, "", "must specify exactly one of: `allow` or `deny`"))
        return None
    action, items = lists[0]
    return AccessControl(action, tuple(v for _, v in items))


def _jwt(spec: Obj) -> JWT | None:
    keys = "realm secret token jwksURI keyCache sniEnabled sniName sslVerify trustedCertSecret"
    j = spec.obj("jwt", frozenset((keys + " sslVerifyDepth").split()))
    if j is None:
        return None
    ctx = j.ctx
    realm = j.text("realm")
    if not realm:
        ctx.add(required(j.at("realm"), "realm field must be present"))
        return None
    ctx.extend([invalid(j.at("realm"), realm, m) for m in rules.realm(realm)])
    secret, jwks = j.text("secret"), j.text("jwksURI")
    if not secret and not jwks:
        ctx.add(required(j.at("secret"), "either Secret or JwksURI must be present"))
        return None
    if secret and jwks:
        ctx.add(forbidden(j.at("secret"), "only either of Secret or JwksURI can be used"))
        return None
    if jwks:
        _jwks(j, jwks)
        return None
    _secret(j, "secret")
    token = j.text("token")
    if token:
        _jwt_token(j, token)
    if j.text("keyCache"):
        ctx.add(forbidden(j.at("keyCache"), "key cache must not be used when using Secret"))
    if j.boolean("sniEnabled"):
        ctx.add(forbidden(j.at("sniEnabled"), "sniEnabled can only be set when JwksURI is set"))
    elif j.text("sniName"):
        ctx.add(forbidden(j.at("sniName"), "sniName can only be set when JwksURI is set"))
    return JWT(realm, secret, token)


def _jwks(j: Obj, uri: str) -> None:
    """NIC's rules for keys from a URL, then ferryman's refusal: the user fixes both at once."""
    ctx = j.ctx
    ctx.extend([invalid(j.at("jwksURI"), uri, m) for m in url_problems(uri)])
    if token := j.text("token"):
        _jwt_token(j, token)
    cache = j.text("keyCache")
    if not cache:
        ctx.add(required(j.at("keyCache"), "key cache must be set, example value: 1h"))
    elif rules.time_ms(cache) is None:
        ctx.add(invalid(j.at("keyCache"), cache, rules.TIME_ERROR))
    if j.text("sniName") and not j.boolean("sniEnabled"):
        message = "sniServerName can only be set when sniEnabled is true"
        ctx.add(forbidden(j.at("sniName"), message))
    if j.text("trustedCertSecret"):
        _secret(j, "trustedCertSecret")
        if not j.boolean("sslVerify"):
            message = "sslVerify should be enabled when trustedCertSecret is specified"
            ctx.add(invalid(j.at("sslVerify"), False, message))
    reason = "keys fetched from a remote server; put the JWKS in a Secret of type nginx.org/jwk"
    ctx.add(not_supported(j.at("jwksURI"), reason))


def url_problems(value: str) -> list[str]:
    """NIC's validateURL: scheme, host and path present; the host a DNS name; a valid port."""
    if bad := rules.token(value, "URL"):
        return bad
    try:
        parts = urlsplit(value)
    except ValueError as e:
        return [str(e)]
    if not parts.scheme:
        return ["scheme required, please use the prefix http(s)://"]
    if not parts.netloc:
        return ["hostname required"]
    if not parts.path:
        return ["path required"]
    host, colon, port = parts.netloc.rpartition("@")[2].partition(":")
    errs = rules.dns1123_subdomain(host)  # as written: urlsplit's hostname is lowercased
    if colon and not re.fullmatch(r"[0-9]{1,5}", port):
        errs.append("invalid port")
    elif colon:
        errs += rules.port(int(port))
    return errs


def _jwt_token(j: Obj, token: str) -> None:
    where = j.at("token")
    if token.count("$") != 1:
        j.ctx.add(invalid(where, token, "must have 1 var"))
        return
    name = token[1:]
    if not name.startswith(("arg_", "http_", "cookie_")):
        j.ctx.add(invalid(where, token, "must only have special vars"))
        return
    found = rules.variables("${" + name + "}", ("arg_", "http_", "cookie_"), ())
    j.ctx.extend([invalid(where, v, m) for v, m in found])


def _basic_auth(spec: Obj) -> BasicAuth | None:
    b = spec.obj("basicAuth", frozenset({"realm", "secret"}))
    if b is None:
        return None
    if not b.text("secret"):
        b.ctx.add(required(b.at("secret")))
        return None
    realm = b.text("realm")
    b.ctx.extend([invalid(b.at("realm"), realm, m) for m in rules.realm(realm)])
    return BasicAuth(_secret(b, "secret"), realm)


def _api_key(spec: Obj) -> APIKey | None:
    a = spec.obj("apiKey", frozenset({"suppliedIn", "clientSecret"}))
    if a is None:
        return None
    ctx = a.ctx
    s = a.obj("suppliedIn", frozenset({"header", "query"}))
    if s is None:
        ctx.add(required(a.at("suppliedIn"), "suppliedIn cannot be nil"))
        return None
    headers, queries = s.strs("header"), s.strs("query")
    if headers is None and queries is None:
        ctx.add(required(s.path, "at least one query or header name must be provided"))
    for h in headers or ():
        ctx.extend([invalid(s.at("header"), h, m) for m in rules.http_header_name(h)])
    for q in queries or ():
        if bad := rules.escaped_string(q):
            ctx.add(invalid(s.at("query"), q, bad))
        elif not re.fullmatch(r"[-_.A-Za-z0-9]+", q):
            message = (
                "a query parameter name must consist of alphanumerics, '-', '_' or '.' (ferryman)"
            )
            ctx.add(invalid(s.at("query"), q, message))
    if not a.text("clientSecret"):
        ctx.add(required(a.at("clientSecret"), "clientSecret cannot be empty"))
    return APIKey(headers or (), queries or (), _secret(a, "clientSecret", needed=False))


def _ingress_mtls(spec: Obj) -> IngressMTLS | None:
    m = spec.obj(
        "ingressMTLS", frozenset({"clientCertSecret", "crlFileName", "verifyClient", "verifyDepth"})
    )
    if m is None:
        return None
    if not m.text("clientCertSecret"):
        m.ctx.add(required(m.at("clientCertSecret")))
        return None
    secret = _secret(m, "clientCertSecret")
    if m.text("crlFileName"):
        reason = "a CRL file on the controller's disk; put the CRL in the CA Secret as ca.crl"
        m.ctx.add(not_supported(m.at("crlFileName"), reason))
    verify = m.text("verifyClient")
    if verify and verify not in VERIFY_CLIENT:
        shown = ", ".join(VERIFY_CLIENT)
        message = (
            f"'{verify}' contains an invalid NGINX parameter. Accepted parameters are: {shown}"
        )
        m.ctx.add(invalid(m.at("verifyClient"), verify, message))
    depth = m.integer("verifyDepth")
    if depth is not None and depth < 0:
        m.ctx.add(invalid(m.at("verifyDepth"), depth, "must be positive"))
    return IngressMTLS(secret, verify or "on", 1 if depth is None else depth)


def _egress_mtls(spec: Obj) -> EgressMTLS | None:
    keys = "tlsSecret verifyServer verifyDepth protocols sessionReuse ciphers trustedCertSecret"
    e = spec.obj("egressMTLS", frozenset((keys + " serverName sslName").split()))
    if e is None:
        return None
    ctx = e.ctx
    tls_secret = _secret(e, "tlsSecret", needed=False)
    verify_server = e.boolean("verifyServer") is True
    if verify_server and not e.text("trustedCertSecret"):
        ctx.add(required(e.at("trustedCertSecret"), "must be set when verifyServer is 'true'"))
        return None
    trusted = _secret(e, "trustedCertSecret", needed=False)
    depth = e.integer("verifyDepth")
    if depth is not None and depth < 0:
        ctx.add(invalid(e.at("verifyDepth"), depth, "must be positive"))
    ssl_name = e.text("sslName")
    ctx.extend(
        [
            invalid(e.at("sslName"), ssl_name, m)
            for m in rules.dns1123_subdomain(ssl_name)
            if ssl_name
        ]
    )
    protocols = tuple(e.text("protocols").split())
    for p in protocols:
        if p not in TLS_PROTOCOLS:
            ctx.add(
                invalid(
                    e.at("protocols"), p, f"must be one of {', '.join(TLS_PROTOCOLS)} (ferryman)"
                )
            )
    ciphers = e.text("ciphers")
    if ciphers and not re.fullmatch(r"[A-Za-z0-9!:+@_.=-]{1,1024}", ciphers):
        message = "must be an OpenSSL cipher list such as HIGH:!aNULL:!MD5 (ferryman)"
        ctx.add(invalid(e.at("ciphers"), ciphers, message))
    return EgressMTLS(
        tls_secret,
        trusted,
        verify_server,
        1 if depth is None else depth,
        protocols,
        ciphers,
        e.boolean("sessionReuse") is not False,
        e.boolean("serverName") is True,
        ssl_name,
    )


def _cors(spec: Obj) -> CORS | None:
    c = spec.obj("cors", CORS_KEYS)
    return None if c is None else parse_cors(c)


def _external_auth(spec: Obj) -> ExternalAuth | None:
    e = spec.obj("externalAuth", EXTERNAL_AUTH_KEYS)
    return None if e is None else parse_external_auth(e)


_PARSERS: dict[str, Callable[[Obj], PolicyKind | None]] = {
    "accessControl": _access_control,
    "rateLimit": parse_rate_limit,
    "jwt": _jwt,
    "basicAuth": _basic_auth,
    "apiKey": _api_key,
    "ingressMTLS": _ingress_mtls,
    "egressMTLS": _egress_mtls,
    "cors": _cors,
    "externalAuth": _external_auth,
}
