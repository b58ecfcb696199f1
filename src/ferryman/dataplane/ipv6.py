"""Whether this machine can listen on IPv6 (``[::]``), checked once at start.

NGINX refuses to start, or to reload, when a ``listen [::]:<port>`` cannot
bind. A kernel booted with ``ipv6.disable=1`` (or built without IPv6) has no
AF_INET6 sockets at all; a network namespace without IPv6 refuses the bind;
with ``net.ipv6.conf.all.disable_ipv6=1`` the bind may pass but no interface
has an IPv6 address, so nothing could connect. ``ferryman run`` asks here
before NGINX does and, when IPv6 is not there, serves IPv4 only (as
--disable-ipv6) with one warning instead of failing.
"""

from __future__ import annotations

import socket
from pathlib import Path

SYSCTL = Path("/proc/sys/net/ipv6/conf/all/disable_ipv6")


def unavailable(sysctl: Path = SYSCTL) -> str:
    """Why IPv6 cannot be listened on here ("": it can): the sysctl, then an
    AF_INET6 socket bound to ``[::]`` on a free port, IPv6 only, as NGINX's."""
    try:
        if sysctl.read_text().strip() == "1":
            return "net.ipv6.conf.all.disable_ipv6 is 1"
    except OSError:
        pass  # no such file: no IPv6 in this kernel, which the socket tells
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            s.bind(("::", 0))
    except OSError as e:
        return f"no IPv6 socket: {e.strerror or e}"
    return ""
