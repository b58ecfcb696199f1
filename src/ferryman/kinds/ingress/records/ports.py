"""An Ingress's ``nginx.org/listen-ports`` and ``nginx.org/listen-ports-ssl``:
the ports its hosts are served on instead of the default HTTP and HTTPS ports.

NIC writes one ``listen`` per port into the Ingress's own server block, so the
host answers on those ports only (NIC's defaults, 80 and 443, are listed
explicitly to keep them). ferryman keeps its one public server: each port
becomes one more ``listen`` of it and a listener named by its number in the
``$ferryman_listener`` map (configs/http_listeners.py), and the host's H record
names the listeners it is served on (``listeners``: ``"0"`` names the default
ports, configs/routes.py). A port nobody used before reloads once; moving a
host between ports already open changes its record only.

What NIC would hand to NGINX and NGINX would refuse (or what would take a
port from something else) is refused here, port by port, each with a warning;
the Ingress's other ports and everything else keep serving:

- a port above 65535 (NIC's parser accepts up to 2^31-1; ``nginx -t`` fails);
- ferryman's readiness, metrics, stub_status or webhook port, the other scheme's
  default port (``--https-port`` in ``listen-ports``, ``--http-port`` in
  ``listen-ports-ssl``), or a GlobalConfiguration listener's port (any protocol:
  the listener owns it);
- a port in both annotations of one Ingress (refused in ``listen-ports-ssl``);
- a port another, older Ingress serves with the other scheme (``ListenPorts``
  in listen_ports.py decides: the oldest claimant, as for hosts), an older
  Gateway's listener on every address keeps, or NGINX could not bind (another
  process holds it).

The default port of the annotation's own scheme in the list is the default
listener. A scheme whose ports are all refused is served on no port (never
silently on the default one, which the user asked not to serve).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ferryman.configs.http_listeners import Claim
from ferryman.kinds.ingress.parse.annotations import PREFIX
from ferryman.resources.annotation_values import BadValue, parse_ports

PLAIN = "listen-ports"
SSL = "listen-ports-ssl"
# The name a host's listeners field gives the default ports (whose listener is
# ""): no GlobalConfiguration listener (a DNS-1035 label) and no port is "0".
DEFAULT = "0"
MAX_PORT = 65535


@dataclass(frozen=True)
class Wanted:
    """The ports asked for, in order, duplicates dropped; None: not asked (the
    default port of that scheme)."""

    plain: tuple[int, ...] | None = None
    ssl: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Limits:
    """What ports an Ingress may take: the default ports and the reserved ones
    (port -> what holds it, said in the warning)."""

    http_port: int
    https_port: int
    reserved: Mapping[int, str]


def wanted(annotations: Mapping[str, str]) -> Wanted:
    """Both annotations parsed (validated when the Ingress was: an invalid one
    rejected it, so it is read as absent here)."""
    return Wanted(_read(annotations, PLAIN), _read(annotations, SSL))


def _read(annotations: Mapping[str, str], key: str) -> tuple[int, ...] | None:
    raw = annotations.get(PREFIX + key)
    if raw is None:
        return None
    try:
        return tuple(dict.fromkeys(parse_ports(raw)))
    except BadValue:
        return None


def reserved_ports(own: Mapping[int, str], listeners: Iterable[tuple[str, int]]) -> dict[int, str]:
    """port -> what holds it: ferryman's own ports (port -> flag) and the
    GlobalConfiguration's listeners (name, port)."""
    out: dict[int, str] = {}
    for name, port in listeners:
        out.setdefault(port, f"is GlobalConfiguration listener {name}'s")
    for port, flag in own.items():
        out[port] = f"is ferryman's {flag}"
    return out


def check(want: Wanted, limits: Limits) -> tuple[Claim, list[str]]:
    """The ports to claim (the defaults left out: always open) and a warning
    per port refused."""
    warnings: list[str] = []
    plain = _checked(want.plain or (), PLAIN, limits, limits.http_port, limits.https_port, warnings)
    ssl = _checked(want.ssl or (), SSL, limits, limits.https_port, limits.http_port, warnings)
    for port in sorted(plain & ssl):
        warnings.append(_refused(SSL, port, f"is in {PREFIX}{PLAIN} too"))
    return Claim(frozenset(plain), frozenset(ssl - plain)), warnings


def _checked(
    ports: Iterable[int], key: str, limits: Limits, own: int, other: int, warnings: list[str]
) -> set[int]:
    out: set[int] = set()
    for port in ports:
        if port == own:
            continue  # the default listener
        why = None
        if port > MAX_PORT:
            why = f"is above {MAX_PORT}"
        elif port == other:
            flag = "--https-port (TLS)" if key == PLAIN else "--http-port (plain HTTP)"
            why = f"is ferryman's {flag}"
        elif port in limits.reserved:
            why = limits.reserved[port]
        if why is None:
            out.add(port)
        else:
            warnings.append(_refused(key, port, why))
    return out


def _refused(key: str, port: int, why: str) -> str:
    return f"{PREFIX}{key}: port {port} {why}; the host is not served on it"


def refused_warning(key: str, port: int, why: str) -> str:
    """A port refused to every Ingress: NGINX cannot bind it, or an older
    Gateway keeps it (``why`` says which)."""
    return _refused(key, port, why)


def taken_warning(key: str, port: int, by: str) -> str:
    """A port an older Ingress serves with the other scheme."""
    other = "plain HTTP" if key == SSL else "TLS"
    return _refused(key, port, f"is served with {other} for Ingress {by}")


def listeners(
    want: Wanted, plain: Iterable[int], ssl: Iterable[int], limits: Limits
) -> tuple[str, str] | None:
    """The H record's listener names (configs/routes.py ``listeners_suffix``):
    per scheme, the ports granted (``plain``, ``ssl``) in the order asked, the
    default port as ``DEFAULT``; "" serves that scheme on no port. None when
    neither annotation is set: the default ports only."""
    if want.plain is None and want.ssl is None:
        return None
    return (
        _names(want.plain, set(plain), limits.http_port),
        _names(want.ssl, set(ssl), limits.https_port),
    )


def _names(asked: tuple[int, ...] | None, granted: set[int], default: int) -> str:
    if asked is None:
        return DEFAULT
    names = [DEFAULT if p == default else str(p) for p in asked if p == default or p in granted]
    return ",".join(dict.fromkeys(names))
