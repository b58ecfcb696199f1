"""An Ingress's ``ssl-passthrough`` hosts as S records of the tls-passthrough
listener (pure).

The listener is the stream server on the HTTPS port that ``--enable-tls-passthrough``
(``--enable-ssl-passthrough``) adds: it reads the client's SNI name without
ending TLS and looks ``S:tls-passthrough/<name>`` up, the record a passthrough
TransportServer writes for its host (kinds/transport/records/stream.py); every
other name goes on to ferryman's own HTTPS server. An Ingress that owns a host
(the oldest claimant, TransportServers included) writes the same record for
it, naming the backend ingress-nginx passes the host's connections to: the
Service of the rule's ``/`` path, else the Ingress's defaultBackend (its root
location's). A wildcard host covers the names one label deeper, as a
passthrough TransportServer's does. Adding, editing or removing the annotation changes records only,
and the backend's endpoints are its E record: no reload.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ferryman.configs.model import CATCH_ALL, BackendKey
from ferryman.kinds.ingress.parse.ingress import Ingress, ServiceBackend
from ferryman.kinds.ingress.parse.ingress_nginx_passthrough import KEY, PREFIX
from ferryman.kinds.ingress.records.virtual_hosts import backend_of
from ferryman.kinds.transport.records.stream import passthrough_name, passthrough_record

FLAG = "--enable-ssl-passthrough"


@dataclass(frozen=True)
class Passed:
    """The S records (name -> value), the backends they name, and what to say."""

    records: dict[str, str]
    backends: frozenset[BackendKey]
    warnings: tuple[str, ...]


NOTHING = Passed({}, frozenset(), ())


def _root(ing: Ingress, host: str) -> ServiceBackend | None:
    """ingress-nginx's root location of ``host``: its ``/`` path, else the defaultBackend."""
    for rule in ing.rules:
        if rule.host == host:
            for p in rule.paths:
                if p.path == "/":
                    return p.backend
    return ing.default_backend


def passed_through(ing: Ingress | None, owned: Iterable[str], enabled: bool) -> Passed:
    """The records of the hosts ``ing`` owns (``owned``) and passes through;
    ``enabled``: the data plane has the tls-passthrough listener."""
    if ing is None or not ing.ssl_passthrough:
        return NOTHING
    name = PREFIX + KEY
    if not enabled:
        # ingress-nginx ignores the annotation without its flag too.
        return Passed(
            {},
            frozenset(),
            (
                f"annotation {name}: needs {FLAG} (an alias of --enable-tls-passthrough), as "
                "ingress-nginx's flag of that name: TLS is ended here",
            ),
        )
    # server-alias and from-to-www names are other servers' in ingress-nginx,
    # which passes through the hosts of the rules only.
    others = set(ing.paths.aliases) | {www for www, _ in ing.paths.www}
    records: dict[str, str] = {}
    backends: set[BackendKey] = set()
    warnings: list[str] = []
    for host in sorted(owned):
        if host in others:
            continue
        if host in ("", CATCH_ALL):
            warnings.append(
                f"annotation {name}: a rule without a host has no SNI name to route by: "
                "its TLS is ended here"
            )
            continue
        backend = _root(ing, host)
        if backend is None:
            warnings.append(
                f"annotation {name}: host {host} has neither a / path nor a defaultBackend "
                "to pass its connections to: its TLS is ended here, as ingress-nginx does"
            )
            continue
        key = backend_of(ing, backend)
        records[passthrough_name(host)] = passthrough_record(key)
        backends.add(key)
    return Passed(records, frozenset(backends), tuple(warnings))
