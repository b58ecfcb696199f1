"""ingress-nginx's per-client limits beyond limit-rps/limit-rpm: ``limit-connections``
and the addresses exempt from all of them (``limit-allowlist``, formerly
``limit-whitelist``).

ingress-nginx keys its limits on a variable that is the client's address, or
empty for a client of the allow list (a ``geo`` block): NGINX does not limit
an empty key, so such a client is limited by none of limit-rps, limit-rpm and
limit-connections. ``limit-connections`` is ``limit_conn`` on that key, one
zone per Ingress: the requests of one client being served at once, over all of
the Ingress's paths, and ingress-nginx's ``limit-conn-status-code`` (503)
beyond.

A value ingress-nginx would not take is not applied, with a Warning (as the
other non-access annotations): an unusable allow list leaves every client
limited, which is never more open than asked.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass

PREFIX = "nginx.ingress.kubernetes.io/"
# The newer name first: ingress-nginx reads limit-whitelist only without it.
EXEMPT_KEYS = ("limit-allowlist", "limit-whitelist")
CONNECTIONS = "limit-connections"
LIMITS = ("limit-rps", "limit-rpm", CONNECTIONS)
# What limit-whitelist is read with (the limits it exempts from, the newer name).
WHITELIST_READS = ("limit-allowlist", *LIMITS)
# NGINX's limit_conn takes a number up to 65535 (ngx_http_limit_conn_module).
MAX_CONNECTIONS = 65535
_COUNT = re.compile(r"[0-9]{1,9}")


@dataclass(frozen=True)
class ClientLimits:
    """What the Ingress's clients are limited by beyond its limit-req."""

    connections: int = 0  # concurrent requests per client address; 0: no limit
    exempt: tuple[str, ...] = ()  # networks (CIDR text) no limit applies to


def _exempt(annotations: Mapping[str, str], warnings: list[str]) -> tuple[str, ...]:
    key = next((k for k in EXEMPT_KEYS if PREFIX + k in annotations), None)
    if key is None:
        return ()
    for other in EXEMPT_KEYS:
        if other != key and PREFIX + other in annotations:
            warnings.append(f"annotation {PREFIX}{other} is not applied: {PREFIX}{key} is set")
    raw = annotations[PREFIX + key]
    networks: list[str] = []
    for part in raw.split(","):
        text = part.strip()
        if not text:
            continue
        try:
            networks.append(str(ipaddress.ip_network(text, strict=False)))
        except ValueError:
            warnings.append(
                f"annotation {PREFIX}{key}: {raw!r}: {text!r} is not an address or CIDR block: "
                "not applied (every client is limited)"
            )
            return ()
    return tuple(dict.fromkeys(networks))


def _connections(annotations: Mapping[str, str], warnings: list[str]) -> int:
    raw = annotations.get(PREFIX + CONNECTIONS)
    if raw is None:
        return 0
    text = raw.strip()
    if not _COUNT.fullmatch(text) or int(text) > MAX_CONNECTIONS:
        warnings.append(
            f"annotation {PREFIX}{CONNECTIONS}: {raw!r} must be a whole number from 0 to "
            f"{MAX_CONNECTIONS}: not applied"
        )
        return 0
    return int(text)


def client_limits(annotations: Mapping[str, str], warnings: list[str]) -> ClientLimits | None:
    """The Ingress's connection limit and exempt clients (None: neither applies);
    what is not applied is appended to ``warnings``."""
    connections = _connections(annotations, warnings)
    exempt = _exempt(annotations, warnings)
    if exempt and not any(PREFIX + k in annotations for k in LIMITS):
        warnings.append(
            f"annotation {PREFIX}{next(k for k in EXEMPT_KEYS if PREFIX + k in annotations)} "
            "is not applied: no limit-rps, limit-rpm or limit-connections to exempt from"
        )
        exempt = ()
    if not connections and not exempt:
        return None
    return ClientLimits(connections, exempt)
