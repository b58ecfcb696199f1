"""ingress-nginx's ``ssl-passthrough`` annotation: TLS for the Ingress's hosts is
not ended by the controller; each connection on the HTTPS port whose SNI name
is one of them goes, undecrypted, to the backend of the host's ``/`` path (or
the Ingress's defaultBackend), whatever the request inside asks for.

ingress-nginx needs its ``--enable-ssl-passthrough`` flag for it, and ignores
the annotation without it; ferryman's flag is NIC's ``--enable-tls-passthrough``
(``--enable-ssl-passthrough`` is its alias), whose SNI table on the HTTPS port
TransportServers share (kinds/ingress/records/passthrough.py writes the hosts'
entries). The HTTP port serves the Ingress as without the annotation, as
ingress-nginx's HTTP server for the host does (force-ssl-redirect included).
"""

from __future__ import annotations

from collections.abc import Mapping

PREFIX = "nginx.ingress.kubernetes.io/"
KEY = "ssl-passthrough"
# strconv.ParseBool's words, which ingress-nginx's GetBoolAnnotation takes.
_TRUE = frozenset({"1", "t", "true"})
_FALSE = frozenset({"0", "f", "false"})


def ssl_passthrough(annotations: Mapping[str, str], warnings: list[str]) -> bool:
    """Whether the Ingress asks for its hosts' TLS to be passed through (a value
    ingress-nginx would not read: not applied, said in ``warnings``)."""
    raw = annotations.get(PREFIX + KEY)
    if raw is None:
        return False
    value = raw.strip().lower()
    if value not in _TRUE | _FALSE:
        warnings.append(
            f"annotation {PREFIX}{KEY}: {raw!r} is not true or false: not applied "
            "(TLS is ended here)"
        )
    return value in _TRUE
