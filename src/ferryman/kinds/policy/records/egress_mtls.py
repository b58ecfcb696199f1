"""The ``egressMTLS`` Policy: TLS to the upstream with a client certificate
(ferryman_egress.lua).

NIC writes ``proxy_ssl_certificate``, ``..._key``, ``proxy_ssl_trusted_certificate``,
``proxy_ssl_verify``, ``..._verify_depth``, ``..._protocols``, ``..._ciphers``,
``..._session_reuse``, ``..._server_name`` and ``proxy_ssl_name`` into the
location. Set per request from the P item, with no reload: the client
certificate and key (``data:`` values) and the name sent as SNI (NGINX takes
them from variables), and ``verifyServer`` with ``trustedCertSecret``'s CAs
and ``verifyDepth``, ``protocols`` and ``ciphers`` (which take no variables:
ngx_http_ferryman_module gives the request's upstream a TLS context holding
them, ferryman_upstream_verify.lua; the name verified is ``sslName``, sent as
SNI only with ``serverName``, as NGINX's ``proxy_ssl_name``/
``proxy_ssl_server_name``). NIC's default protocols and ciphers (which it
always writes) leave NGINX's own. ``sessionReuse: false`` is served as it
is: no upstream TLS session is ever resumed (the balancer sets each peer
itself, and lua-nginx-module's balancer then saves no session).

These take effect on upstreams with ``tls.enable`` (``proxy_pass https://``);
on a plain one NGINX's proxy_ssl directives do nothing, in NIC too.
"""

from __future__ import annotations

from dataclasses import dataclass

from ferryman.configs.record_text import b64
from ferryman.configs.secret_state import SecretRead
from ferryman.kinds.policy.parse.policy import EgressMTLS, Policy
from ferryman.kinds.policy.records.base import Enforced, Owner, Step
from ferryman.kinds.policy.records.reads import PolicyReads
from ferryman.resources.secret import TLS_TYPE, TLSPair, parse_tls_secret
from ferryman.resources.secret_ca import CA_TYPE, CABundle, parse_ca_secret, parse_tls_ca

# NIC's defaults (policy.go: generateString(..., "TLSv1 TLSv1.1 TLSv1.2"), "DEFAULT").
_NIC_PROTOCOLS = ("TLSv1", "TLSv1.1", "TLSv1.2")
_NIC_CIPHERS = "DEFAULT"
# The deepest verification handed to the data plane (an int in C; OpenSSL's
# own default is 100): a larger verifyDepth verifies as this one.
MAX_VERIFY_DEPTH = 100


@dataclass(frozen=True)
class Egress(Enforced):
    chain: bytes  # PEM; empty: no client certificate
    key: bytes
    name: str  # the SNI name (and, verifying, the name checked); "": none
    # verifyServer: the trusted CAs (PEM; empty: not verified), the depth and
    # whether the name is sent as SNI (serverName).
    trusted: bytes = b""
    depth: int = 1
    sni: bool = False
    # protocols (TLS_PROTOCOLS names) and ciphers (an OpenSSL list); none: NGINX's.
    protocols: tuple[str, ...] = ()
    ciphers: str = ""
    letter = "e"

    def fields(self) -> tuple[str, ...]:
        fields = (b64(self.chain), b64(self.key), b64(self.name))
        if not self.trusted and not self.protocols and not self.ciphers:
            return fields  # the item as before verifyServer
        return (
            *fields,
            b64(self.trusted),
            str(self.depth),
            "1" if self.sni else "0",
            ",".join(self.protocols),
            b64(self.ciphers),
        )


def secret_problem(
    what: str, key: str, where: str, read: SecretRead[object], want: str
) -> str | None:
    """NIC's messages for a Secret a ``what`` ("EgressMTLS", "ExternalAuth")
    policy cannot use, else None."""
    lead = f"{what} policy {key} references"
    if not read.secret_type:
        return f"{lead} an invalid secret {where}: secret doesn't exist"
    if read.secret_type != want:
        return f"{lead} a secret {where} of a wrong type '{read.secret_type}', must be '{want}'"
    if read.value is None:
        return f"{lead} an invalid secret {where}: {read.error}"
    return None


def translate(
    policy: Policy, key: str, current: Enforced | None, owner: Owner, reads: PolicyReads
) -> Step:
    e = policy.policy
    assert isinstance(e, EgressMTLS)
    if current is not None:
        message = (
            "Multiple egressMTLS policies in the same context is not valid. "
            f"EgressMTLS policy {key} will be ignored"
        )
        return Step(None, (message,))
    ns = policy.meta.namespace
    pair = TLSPair(b"", b"")
    if e.tls_secret:
        read = reads.secret_read(ns, e.tls_secret, parse_tls_secret)
        if problem := secret_problem("EgressMTLS", key, f"{ns}/{e.tls_secret}", read, TLS_TYPE):
            return Step(None, (problem,), error=True)
        assert isinstance(read.value, TLSPair)
        pair = read.value
    trusted = b""
    if e.trusted_cert_secret:
        read = reads.secret_read(ns, e.trusted_cert_secret, parse_ca_secret)
        where = f"{ns}/{e.trusted_cert_secret}"
        if problem := secret_problem("EgressMTLS", key, where, read, CA_TYPE):
            return Step(None, (problem,), error=True)
        assert isinstance(read.value, CABundle)
        trusted = read.value.certificates
    if e.trusted_in_tls_secret and e.verify_server:
        # ingress-nginx's proxy-ssl-verify: the CAs are proxy-ssl-secret's ca.crt;
        # without one the routes fail closed (500), never proxied unverified.
        read = reads.secret_read(ns, e.tls_secret, parse_tls_ca)
        if problem := secret_problem("EgressMTLS", key, f"{ns}/{e.tls_secret}", read, TLS_TYPE):
            return Step(None, (problem,), error=True)
        assert isinstance(read.value, CABundle)
        trusted = read.value.certificates
    # sessionReuse needs nothing: the balancer (balancer_by_lua, which sets each
    # peer itself) saves and resumes no upstream session, so ``false`` is what is
    # served anyway, and ``true`` (NIC's default) is docs/virtualserver.md's
    # difference: each connection is a full handshake.
    # NIC's defaults, which it writes when a Policy names none, leave NGINX's.
    protocols = e.protocols if e.protocols != _NIC_PROTOCOLS else ()
    ciphers = e.ciphers if e.ciphers != _NIC_CIPHERS else ""
    if e.verify_server:
        # NGINX's proxy_ssl_name: the name checked, sent as SNI with serverName
        # only. Without sslName NIC checks $proxy_host, its upstream's internal
        # name, which no certificate holds: ferryman checks none, which fails
        # the same way (NGINX's "upstream SSL certificate does not match").
        return Step(
            Egress(
                pair.chain,
                pair.key,
                e.ssl_name,
                trusted,
                min(e.verify_depth, MAX_VERIFY_DEPTH),
                e.server_name,
                protocols,
                ciphers,
            )
        )
    # serverName without sslName: NIC sends $proxy_host, its upstream's internal
    # name, which no certificate holds; ferryman sends none.
    name = e.ssl_name if e.server_name else ""
    egress = Egress(pair.chain, pair.key, name, protocols=protocols, ciphers=ciphers)
    return Step(egress)
