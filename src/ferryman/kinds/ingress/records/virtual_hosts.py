"""Ingress -> virtual hosts, with Kubernetes path semantics (see ``routes``).

Prefix paths lose a trailing slash (the spec ignores it); ImplementationSpecific
is treated as Prefix. Rules for the same host are merged in order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ferryman.configs.model import CATCH_ALL, BackendKey, Route, VirtualHost, backend_key
from ferryman.configs.secret_state import SecretState
from ferryman.kinds.ingress.parse.ingress import Ingress, ServiceBackend


def backend_of(ing: Ingress, b: ServiceBackend) -> BackendKey:
    return backend_key(ing.meta.namespace, b.service, b.port_ref)


def _routes(ing: Ingress, host: str) -> tuple[Route, ...]:
    routes = []
    for rule in ing.rules:
        if rule.host != host:
            continue
        for p in rule.paths:
            exact = p.path_type == "Exact"
            path = p.path if exact else (p.path.rstrip("/") or "/")
            routes.append(Route(exact, path, backend_of(ing, p.backend)))
    return tuple(routes)


def _tls_secret(ing: Ingress, host: str) -> str | None:
    for t in ing.tls:
        if host in t.hosts:
            return t.secret_name
    return None


# The key of ``virtual_hosts``' ``secrets`` for --wildcard-tls-secret's state (a
# secretName is never empty): the certificate of tls entries naming no Secret.
WILDCARD = ""


def virtual_hosts(
    ing: Ingress, hosts: Iterable[str], secrets: Mapping[str, SecretState]
) -> tuple[list[VirtualHost], list[str]]:
    """The virtual hosts for the hosts this Ingress owns ("" is the catch-all),
    and warnings for its events. ``secrets`` maps its TLS secret names to state,
    and ``WILDCARD`` to --wildcard-tls-secret's when that is set."""
    out: list[VirtualHost] = []
    warnings: list[str] = list(ing.warnings)
    default = backend_of(ing, ing.default_backend) if ing.default_backend else None
    for host in hosts:
        secret_name = _tls_secret(ing, host) if host else None
        cert_id = None
        if secret_name == "" and WILDCARD not in secrets:
            # NIC's words: without --wildcard-tls-secret the host's handshakes are rejected.
            warnings.append(
                f"TLS termination for host '{host}' requires specifying a TLS secret "
                "or configuring a global wildcard TLS secret"
            )
        elif secret_name == "":
            state = secrets[WILDCARD]
            cert_id = state.cert_id
            if cert_id is None:
                warnings.append(
                    f"the wildcard TLS secret (--wildcard-tls-secret) for host {host} "
                    f"is unusable ({state.error}): TLS handshakes for {host} are rejected"
                )
        elif secret_name is not None:
            state = secrets.get(secret_name, SecretState(None, "not found"))
            cert_id = state.cert_id
            if cert_id is None:
                warnings.append(
                    f"TLS secret {ing.meta.namespace}/{secret_name} for host {host} "
                    f"is unusable ({state.error}): TLS handshakes for {host} are rejected"
                )
        tls = secret_name is not None
        out.append(
            VirtualHost(
                host=host or CATCH_ALL,
                routes=_routes(ing, host),
                default_backend=default,
                tls=tls,
                cert_id=cert_id,
                redirect_https=tls and ing.ssl_redirect,
                balancing=ing.balancing.encode(),
            )
        )
    for t in ing.tls:
        if not t.hosts and t.secret_name:
            warnings.append(
                f"TLS secret {t.secret_name} lists no hosts: ferryman serves TLS only "
                "for the hosts a tls entry names"
            )
    return out, warnings


def secret_names(ing: Ingress) -> set[str]:
    """The Secrets its tls entries name (an entry naming none is ``WILDCARD``'s)."""
    return {t.secret_name for t in ing.tls if t.secret_name}
