"""Ingress -> servers and locations, with Kubernetes path semantics.

Kubernetes matches Prefix paths element-wise and picks the longest match,
Exact winning a tie. NGINX picks an ``=`` location first, then the longest
prefix location. So:

* Exact ``/p``  -> ``location = /p``
* Prefix ``/p`` -> ``location = /p`` and ``location /p/`` (``/p/`` and deeper;
  never ``/pq``); Prefix ``/`` -> ``location /``. A trailing slash on the rule
  is dropped first, as the spec says it is ignored.
* ImplementationSpecific is treated as Prefix.

When two rules produce the same location, Exact beats Prefix, then the first
rule in the Ingress wins. Every server gets a ``location /`` fallback: the
Ingress's defaultBackend, or 404.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ferryman.configs.model import BackendKey, Location, Server, TLSConfig, backend_key
from ferryman.resources.ingress import HTTPPath, Ingress, ServiceBackend


@dataclass(frozen=True)
class SecretState:
    """What the local secret store knows of one Secret."""

    bundle_path: str | None
    error: str | None  # why the secret cannot be used, when bundle_path is None


def backend_of(ing: Ingress, b: ServiceBackend) -> BackendKey:
    return backend_key(ing.meta.namespace, b.service, b.port_ref)


def _locations(ing: Ingress, paths: Iterable[HTTPPath]) -> tuple[Location, ...]:
    # (exact, path) -> (priority, order, backend); lower priority wins.
    chosen: dict[tuple[bool, str], tuple[int, int, BackendKey | None]] = {}

    def offer(exact: bool, path: str, prio: int, order: int, backend: BackendKey) -> None:
        current = chosen.get((exact, path))
        if current is None or (prio, order) < current[:2]:
            chosen[(exact, path)] = (prio, order, backend)

    for order, p in enumerate(paths):
        backend = backend_of(ing, p.backend)
        if p.path_type == "Exact":
            offer(True, p.path, 0, order, backend)
            continue
        prefix = p.path.rstrip("/")
        if not prefix:
            offer(False, "/", 1, order, backend)
        else:
            offer(True, prefix, 1, order, backend)
            offer(False, prefix + "/", 1, order, backend)
    if (False, "/") not in chosen:
        fallback = backend_of(ing, ing.default_backend) if ing.default_backend else None
        chosen[(False, "/")] = (9, 0, fallback)
    return tuple(
        Location(exact, path, backend)
        for (exact, path), (_, _, backend) in sorted(
            chosen.items(), key=lambda kv: (kv[0][1], not kv[0][0])
        )
    )


def _tls_for(ing: Ingress, host: str) -> str | None:
    for t in ing.tls:
        if host in t.hosts:
            return t.secret_name
    return None


def servers_for(
    ing: Ingress, hosts: Iterable[str], secrets: Mapping[str, SecretState]
) -> tuple[list[Server], list[str]]:
    """Servers for the hosts this Ingress owns, and warnings for its events.

    ``secrets`` maps the Ingress's TLS secret names to their state.
    """
    servers: list[Server] = []
    warnings: list[str] = []
    for host in hosts:
        paths = [p for r in ing.rules if r.host == host for p in r.paths]
        tls: TLSConfig | None = None
        secret_name = _tls_for(ing, host) if host else None
        if secret_name is not None:
            state = secrets.get(secret_name, SecretState(None, "not found"))
            if state.bundle_path is None:
                warnings.append(
                    f"TLS secret {ing.meta.namespace}/{secret_name} for host {host} "
                    f"is unusable ({state.error}): TLS handshakes for {host} are rejected"
                )
            tls = TLSConfig(state.bundle_path)
        servers.append(
            Server(
                host=host,
                tls=tls,
                redirect_https=tls is not None and ing.ssl_redirect,
                locations=_locations(ing, paths),
            )
        )
    for t in ing.tls:
        if not t.hosts:
            warnings.append(
                f"TLS secret {t.secret_name} lists no hosts: ferryman serves TLS only "
                "for the hosts a tls entry names"
            )
    return servers, warnings


def secret_names(ing: Ingress) -> set[str]:
    return {t.secret_name for t in ing.tls}
