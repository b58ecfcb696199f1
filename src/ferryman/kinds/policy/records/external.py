"""The ``externalAuth`` Policy: NGINX's ``auth_request`` to a Service, no reload.

NIC writes ``auth_request /_external_auth<authURI>`` and an internal location
proxying it to an upstream of the Service's port (``authServicePorts[0]``,
else 443 with ``sslEnabled``, else 80). ferryman asks the same question per
request: ``ferryman_policy_external.lua`` makes a subrequest
(``ngx.location.capture``) to one internal location of nginx.conf, whose
``proxy_pass`` target (scheme and ``authURI``) comes from this P item and whose
peer is chosen by the balancer every VirtualServer upstream uses, from the
Service's endpoints (the backend key below joins the VirtualServer's, so its
endpoints are pushed like an upstream's). The answer is auth_request's: 2xx
lets the request through, 401 answers 401 with the service's
``WWW-Authenticate``, 403 answers 403, anything else (and no endpoints) 500.

``sslVerify`` verifies the service's certificate against ``trustedCertSecret``'s
CAs (none: the system's) to ``sslVerifyDepth`` for the name ``sniName`` (none:
the Service's ``<name>.<namespace>.svc``), sent as SNI: NGINX's
``proxy_ssl_verify`` and ``proxy_ssl_trusted_certificate`` take no variables,
so ngx_http_ferryman_module gives the subrequest's upstream a TLS context
holding them (ferryman_upstream_verify.lua), with no reload. ``authSigninURI``
(NIC's ``error_page 401`` to a location proxying to the auth service, with
``authSigninRedirectBasePath`` proxied to it too) is not implemented: a
Warning, and the 401 is answered as is. ingress-nginx's ``auth-signin``
(``ExternalAuth.signin_url``) is: a 401 is answered 302 to it with
``rd=<scheme>://<host><escaped request URI>``. A second externalAuth in a context is
ignored (NIC's warning).

P item: ``x|<backend key>|<authURI, base64>|<ssl 0|1>``, then, for
ingress-nginx's auth-url or sslVerify only, ``|<signin, base64, or ->|<redirect param>|
<response headers, ``,``-separated, or ->``, and with sslVerify only
``|<CAs, base64, or ->|<sslVerifyDepth>|<name, base64>`` (for ingress-nginx's
auth-url, three empty fields without sslVerify), then for ingress-nginx's
auth-url ``|<X-Auth-Request-Redirect, base64>|<success or always>|<cache key,
base64, or ->|<cache times: <codes .-separated, or *>=<seconds>;..., or ->|
<Host, base64, or ->`` (``-``: the client's, as NIC sends it).
"""

from __future__ import annotations

from dataclasses import dataclass

from ferryman.configs.model import BackendKey, backend_key
from ferryman.configs.record_text import b64
from ferryman.configs.tenancy import SECRET, SERVICE, check
from ferryman.kinds.policy.parse.external_auth import ExternalAuth
from ferryman.kinds.policy.parse.policy import Policy
from ferryman.kinds.policy.records.base import Enforced, Owner, Step
from ferryman.kinds.policy.records.egress_mtls import MAX_VERIFY_DEPTH, secret_problem
from ferryman.kinds.policy.records.reads import PolicyReads
from ferryman.resources.secret_ca import CA_TYPE, CABundle, parse_ca_secret


@dataclass(frozen=True)
class External(Enforced):
    backend: BackendKey
    auth_uri: str
    ssl: bool
    # On 401: 302 to this URL with <redirect_param>=<the original URL> ("": none).
    signin: str = ""
    redirect_param: str = "rd"
    # The auth response's headers set on the proxied request (ingress-nginx's
    # auth-response-headers; absent in the response: removed from the request).
    response_headers: tuple[str, ...] = ()
    # sslVerify: the service's certificate verified (CAs in PEM, empty: the
    # system's) to depth, for the name.
    verify: bool = False
    trusted: bytes = b""
    depth: int = 1
    name: str = ""
    # ingress-nginx's auth-url (ExternalAuth's fields of the same names).
    request_redirect: str = ""
    set_cookie: str = ""
    cache_key: str = ""
    cache_valid: tuple[tuple[tuple[int, ...], int], ...] = ()
    host_header: str = ""
    letter = "x"

    def fields(self) -> tuple[str, ...]:
        fields: tuple[str, ...] = (self.backend, b64(self.auth_uri), "1" if self.ssl else "0")
        if not (self.signin or self.response_headers or self.verify or self.set_cookie):
            return fields  # NIC's Policy: the item as before
        fields = (
            *fields,
            b64(self.signin) if self.signin else "-",
            self.redirect_param,
            ",".join(self.response_headers) or "-",
        )
        if self.verify:
            trusted = b64(self.trusted) if self.trusted else "-"
            fields = (*fields, trusted, str(self.depth), b64(self.name))
        elif self.set_cookie:
            fields = (*fields, "", "", "")
        if not self.set_cookie:
            return fields
        times = ";".join(
            f"{'.'.join(map(str, codes)) or '*'}={ttl}" for codes, ttl in self.cache_valid
        )
        return (
            *fields,
            b64(self.request_redirect),
            self.set_cookie,
            b64(self.cache_key) if self.cache_key else "-",
            times or "-",
            b64(self.host_header) if self.host_header else "-",
        )

    def backends(self) -> tuple[BackendKey, ...]:
        return (self.backend,)


def port_of(e: ExternalAuth) -> int:
    """NIC's getExAuthServicePort."""
    if e.ports and e.ports[0] > 0:
        return e.ports[0]
    return 443 if e.ssl_enabled else 80


def translate(
    policy: Policy, key: str, current: Enforced | None, owner: Owner, reads: PolicyReads
) -> Step:
    e = policy.policy
    assert isinstance(e, ExternalAuth)
    if current is not None:
        return Step(
            None,
            (
                "Multiple external auth policies in the same context is not valid. "
                f"External auth policy {key} will be ignored",
            ),
        )
    warnings: tuple[str, ...] = ()
    if e.signin_uri:
        warnings = (
            f"ExternalAuth policy {key}: authSigninURI is not implemented yet, "
            "a 401 from the auth service is answered as is",
        )
    namespace = e.service_namespace or policy.meta.namespace
    why = check(reads, "Policy", policy.meta.namespace, SERVICE, namespace, e.service)
    if why is not None:  # tenant mode: the context answers 500
        return Step(None, (f"ExternalAuth policy {key}: {why}",), error=True)
    backend = backend_key(namespace, e.service, str(port_of(e)))
    signin = e.signin_url
    trusted = b""
    if e.ssl_verify and e.trusted_cert_secret:
        ns, _, name = e.trusted_cert_secret.rpartition("/")
        ns = ns or policy.meta.namespace
        why = check(reads, "Policy", policy.meta.namespace, SECRET, ns, name)
        if why is not None:
            return Step(None, (f"ExternalAuth policy {key}: {why}",), error=True)
        read = reads.secret_read(ns, name, parse_ca_secret)
        if problem := secret_problem("ExternalAuth", key, f"{ns}/{name}", read, CA_TYPE):
            return Step(None, (problem,), error=True)
        assert isinstance(read.value, CABundle)
        trusted = read.value.certificates
    return Step(
        External(
            backend,
            e.auth_uri,
            e.ssl_enabled,
            signin,
            e.redirect_param or "rd",
            e.response_headers,
            e.ssl_verify,
            trusted,
            min(e.ssl_verify_depth, MAX_VERIFY_DEPTH),
            (e.sni_name or f"{e.service}.{namespace}.svc") if e.ssl_verify else "",
            e.request_redirect,
            e.set_cookie,
            e.cache_key,
            e.cache_valid,
            e.host_header,
        ),
        warnings,
    )
