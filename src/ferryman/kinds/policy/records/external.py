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

What a per-request design cannot do is refused rather than weakened:
``sslVerify`` (NGINX reads ``proxy_ssl_trusted_certificate`` from a file at
reload only) makes the context answer 500 with a Warning; ``authSigninURI``
(NIC's ``error_page 401`` to a location proxying to the auth service, with
``authSigninRedirectBasePath`` proxied to it too) is not implemented: a
Warning, and the 401 is answered as is. ingress-nginx's ``auth-signin``
(``ExternalAuth.signin_url``) is: a 401 is answered 302 to it with
``rd=<scheme>://<host><escaped request URI>``. A second externalAuth in a context is
ignored (NIC's warning).

P item: ``x|<backend key>|<authURI, base64>|<ssl 0|1>``, then, for
ingress-nginx's auth-url only, ``|<signin, base64, or ->|<redirect param>|
<response headers, ``,``-separated, or ->``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ferryman.configs.model import BackendKey, backend_key
from ferryman.configs.record_text import b64
from ferryman.configs.tenancy import SERVICE, check
from ferryman.kinds.policy.parse.external_auth import ExternalAuth
from ferryman.kinds.policy.parse.policy import Policy
from ferryman.kinds.policy.records.base import Enforced, Owner, Step
from ferryman.kinds.policy.records.reads import PolicyReads


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
    letter = "x"

    def fields(self) -> tuple[str, ...]:
        fields = (self.backend, b64(self.auth_uri), "1" if self.ssl else "0")
        if not self.signin and not self.response_headers:
            return fields  # NIC's Policy: the item as before
        return (
            *fields,
            b64(self.signin) if self.signin else "-",
            self.redirect_param,
            ",".join(self.response_headers) or "-",
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
    if e.ssl_verify:
        return Step(
            None,
            (
                f"ExternalAuth policy {key}: sslVerify is not implemented by ferryman "
                "(the trusted certificate needs a reload); the policy's context answers 500",
            ),
            error=True,
        )
    warnings: tuple[str, ...] = ()
    if e.signin_uri:
        warnings = (
            f"ExternalAuth policy {key}: authSigninURI is not implemented yet, "
            "a 401 from the auth service is answered as is",
        )
    namespace = e.service_namespace or policy.meta.namespace
    why = check(reads, "Policy", policy.meta.namespace, SERVICE, namespace, e.service)
    if why is not None:  # tenant mode: the context answers 500, as for sslVerify
        return Step(None, (f"ExternalAuth policy {key}: {why}",), error=True)
    backend = backend_key(namespace, e.service, str(port_of(e)))
    signin = e.signin_url
    return Step(
        External(
            backend,
            e.auth_uri,
            e.ssl_enabled,
            signin,
            e.redirect_param or "rd",
            e.response_headers,
        ),
        warnings,
    )
