"""``listen`` directives of a public port: IPv4 and, unless --disable-ipv6, IPv6.

NIC listens on ``[::]:<port>`` beside every IPv4 ``listen`` (its
``-disable-ipv6`` drops those lines), and so does ferryman: each public port
NGINX opens (the HTTP and HTTPS ports, the stub_status port, Ingresses'
``nginx.org/listen-ports``, GlobalConfiguration listeners, Gateway listeners,
the TLS passthrough and TransportServer stream servers) gets one line per
family. Each family is taken on its own, as NIC's templates do: a listener
naming an IPv4 address listens there and on every IPv6 address unless it
names one too, and the other way round.

The IPv6 wildcard socket says ``ipv6only=on`` (NGINX's default, written out):
the IPv4 socket stays a separate one, so IPv4 clients keep their plain
``$remote_addr`` rather than an IPv4-mapped IPv6 one. NGINX takes a socket's
options from one ``listen`` only, so ``ipv6only=on`` goes with ``params``, the
options of the line that opens the socket (callers write other servers'
lines on the same port without options).

Every address comes validated (``ipaddress``, by its parser or the CLI) and
every parameter is ferryman's own text.
"""

from __future__ import annotations

ANY_IPV6 = "::"


def listens(
    port: int,
    params: str = "",
    *,
    ipv4: str = "",
    ipv6: str = "",
    dual_stack: bool = True,
    ipv6_only: bool = True,
) -> list[str]:
    """``listen ...;`` for ``port`` with ``params`` (e.g. ``"ssl reuseport"``):
    on ``ipv4`` (``""``: every IPv4 address), then, with ``dual_stack``, on
    ``ipv6`` (``""``: every IPv6 address). ``ipv6_only``: the wildcard IPv6
    line says ``ipv6only=on`` (False for a line that repeats a port another
    line opened with options: NGINX refuses options given twice)."""
    tail = f" {params}" if params else ""
    lines = [f"listen {ipv4}:{port}{tail};" if ipv4 else f"listen {port}{tail};"]
    if dual_stack:
        if ipv6 and ipv6 != ANY_IPV6:
            lines.append(f"listen [{ipv6}]:{port}{tail};")
        else:
            only = " ipv6only=on" if ipv6_only else ""
            lines.append(f"listen [{ANY_IPV6}]:{port}{tail}{only};")
    return lines
