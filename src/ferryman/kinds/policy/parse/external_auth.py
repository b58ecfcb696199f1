"""The ``externalAuth`` Policy: model and NIC's rules (validateExternalAuth)."""

from __future__ import annotations

from dataclasses import dataclass

from ferryman.resources import nic_rules as rules
from ferryman.resources.nic_fields import Obj, forbidden, invalid, required

EXTERNAL_AUTH_KEYS = frozenset(
    {
        "authURI",
        "authServiceName",
        "authServicePorts",
        "authSigninURI",
        "authSnippets",
        "authSigninRedirectBasePath",
        "sslEnabled",
        "sslVerify",
        "sslVerifyDepth",
        "trustedCertSecret",
        "sniName",
    }
)
_DANGEROUS = frozenset(";{}\n\r$`'\"\\")


@dataclass(frozen=True)
class ExternalAuth:
    auth_uri: str
    service: str  # the Service's name
    service_namespace: str  # "" when authServiceName has none (the Policy's)
    ports: tuple[int, ...] = ()
    signin_uri: str = ""
    signin_redirect_base_path: str = ""
    ssl_enabled: bool = False
    ssl_verify: bool = False
    ssl_verify_depth: int = 1
    trusted_cert_secret: str = ""
    sni_name: str = ""
    # ingress-nginx's auth-signin (a 302 to it, ${variable}s filled in), its
    # auth-signin-redirect-param ("-": none added) and auth-response-headers
    # (no Policy field sets them; NIC's authSigninURI is another thing).
    signin_url: str = ""
    redirect_param: str = "rd"
    response_headers: tuple[str, ...] = ()
    # ingress-nginx's auth-url only: X-Auth-Request-Redirect (a template as
    # signin_url's), when the service's Set-Cookie reaches the client ("":
    # never, NIC's; "success"; "always"), and the answer's cache key (a
    # template, "": none) with its times by status (codes () means any).
    request_redirect: str = ""
    set_cookie: str = ""
    cache_key: str = ""
    cache_valid: tuple[tuple[tuple[int, ...], int], ...] = ()
    # ingress-nginx's auth-url: the Host its auth location sends, the URL's
    # host ("": the client's, NIC's).
    host_header: str = ""


def _uri(e: Obj, key: str) -> str:
    value = e.text(key)
    if key == "authURI" and not value:
        e.ctx.add(required(e.at(key), "authURI is required"))
    elif value:
        e.ctx.extend([invalid(e.at(key), value, m) for m in rules.path(value)])
    return value


def _reference(e: Obj, key: str, check: str) -> tuple[str, str]:
    """``name`` or ``namespace/name``, each part checked as NIC does."""
    value = e.text(key)
    parts = value.split("/")
    if len(parts) > 2:
        e.ctx.add(
            invalid(
                e.path,
                value,
                f"{check} reference must be in the format {check}-name or namespace/{check}-name",
            )
        )
        return "", value
    namespace = parts[0] if len(parts) == 2 else ""
    name = parts[-1]
    if namespace:
        e.ctx.extend(
            [
                invalid(f"{e.at(key)}.namespace", namespace, m)
                for m in rules.dns1123_label(namespace)
            ]
        )
    where = f"{e.at(key)}.name" if check == "service" else e.at(key)
    checker = rules.dns1035_label if check == "service" else rules.dns1123_subdomain
    e.ctx.extend([invalid(where, name, m) for m in checker(name)])
    return namespace, name


def parse_external_auth(e: Obj) -> ExternalAuth:
    ctx = e.ctx
    if e.text("authSnippets"):
        # ferryman has no snippets (NIC without -enable-snippets).
        ctx.add(
            forbidden(
                e.at("authSnippets"),
                "snippets must be enabled via cli argument -enable-snippets to use authSnippets",
            )
        )
    auth_uri = _uri(e, "authURI")
    if not e.text("authServiceName"):
        ctx.add(required(e.at("authServiceName")))
        namespace, service = "", ""
    else:
        namespace, service = _reference(e, "authServiceName", "service")
    ports = []
    for where, port in e.int_items("authServicePorts") or ():
        ctx.extend([invalid(where, port, m) for m in rules.port(port)])
        ports.append(port)
    signin = _uri(e, "authSigninURI")
    base = _uri(e, "authSigninRedirectBasePath")
    ssl_enabled = bool(e.boolean("sslEnabled"))
    ssl_verify = bool(e.boolean("sslVerify"))
    if ssl_verify and not ssl_enabled:
        ctx.add(invalid(e.at("sslVerify"), True, "sslEnabled must be true when sslVerify is true"))
    trusted = e.text("trustedCertSecret")
    if trusted:
        if not ssl_enabled:
            ctx.add(
                invalid(
                    e.at("trustedCertSecret"),
                    trusted,
                    "sslEnabled must be true when trustedCertSecret is set",
                )
            )
        if not ssl_verify:
            ctx.add(
                invalid(
                    e.at("trustedCertSecret"),
                    trusted,
                    "sslVerify must be true when trustedCertSecret is set",
                )
            )
        _reference(e, "trustedCertSecret", "secret")
    sni = e.text("sniName")
    if sni and _DANGEROUS & set(sni):
        ctx.add(invalid(e.at("sniName"), sni, "contains invalid characters"))
    depth = e.integer("sslVerifyDepth")
    if depth is not None and depth < 0:
        ctx.add(invalid(e.at("sslVerifyDepth"), depth, "must be a non-negative integer"))
    return ExternalAuth(
        auth_uri,
        service,
        namespace,
        tuple(ports),
        signin,
        base,
        ssl_enabled,
        ssl_verify,
        1 if depth is None else depth,
        trusted,
        sni,
    )
