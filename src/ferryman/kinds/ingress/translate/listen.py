"""An Ingress's ``nginx.org/listen-ports``/``listen-ports-ssl`` applied to the
hosts it writes: checked (kinds/ingress/records/ports.py), claimed from the ports
every Ingress shares (listen_ports.py), and named in each host's H record."""

from __future__ import annotations

from dataclasses import replace

from ferryman.engine.configuration import age_key
from ferryman.engine.reads import Reads, own_ports
from ferryman.engine.settings import Settings
from ferryman.kinds.ingress.parse.annotations import PREFIX
from ferryman.kinds.ingress.parse.ingress import Ingress
from ferryman.kinds.ingress.records.hosts import Written
from ferryman.kinds.ingress.records.ports import (
    PLAIN,
    SSL,
    Limits,
    Wanted,
    check,
    listeners,
    refused_warning,
    reserved_ports,
    taken_warning,
    wanted,
)
from ferryman.resources.meta import ObjectRef
from ferryman.translators.listen_ports import ListenPorts


def limits(settings: Settings, reads: Reads) -> Limits:
    """The default ports and the reserved ones (reading the GlobalConfiguration
    makes its change translate the Ingress again)."""
    gc = reads.global_configuration()
    s = settings
    held = [(listener.name, listener.port) for listener in gc.listeners] if gc else []
    reserved = reserved_ports(own_ports(s), held)
    return Limits(s.listen.http_port, s.listen.https_port, reserved)


def listen_ports(
    ing: Ingress | None,
    ref: ObjectRef,
    written: list[Written],
    reads: Reads,
    settings: Settings,
    ports: ListenPorts,
) -> tuple[list[Written], list[str], set[ObjectRef]]:
    """``written`` with the listeners its hosts are served on, the warnings, and
    the other Ingresses to render again (a port changed scheme hands). A
    minion's hosts are its master's: it asks for no port."""
    want = wanted(ing.meta.annotations) if ing is not None and ing.mergeable != "minion" else None
    if want is None or want == Wanted() or not written:
        return written, [], ports.release(ref)
    assert ing is not None
    warnings = []
    if want.ssl is not None and not any(w.host.tls for w in written):
        # NIC's template writes the TLS listens only for a server with TLS.
        warnings.append(f"{PREFIX}{SSL}: the Ingress has no TLS host; ignored")
        want = replace(want, ssl=None)
    bounds = limits(settings, reads)
    claim, more = check(want, bounds)
    warnings += more
    others = ports.claim(ref, age_key(ing), claim)
    grant = ports.grant(ref)
    warnings += [taken_warning(SSL if ssl else PLAIN, p, by) for p, ssl, by in grant.taken]
    warnings += [refused_warning(SSL if ssl else PLAIN, p, why) for p, ssl, why in grant.refused]
    names = listeners(want, grant.plain, grant.ssl, bounds)
    return [replace(w, host=replace(w.host, listeners=names)) for w in written], warnings, others
