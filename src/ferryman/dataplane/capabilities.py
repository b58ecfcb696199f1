"""CAP_NET_BIND_SERVICE passed on from ferryman to the server it starts.

A pod that runs as a user other than root and asks for ``NET_BIND_SERVICE``
(NIC's own manifests and chart do, instead of the sysctl
``net.ipv4.ip_unprivileged_port_start`` that deploy/ sets) starts ferryman with
the capability in its permitted and effective sets only: container runtimes set
no inheritable or ambient capabilities, so any program ferryman executes loses it
(capabilities(7), "Transformation of capabilities during execve"), and NGINX
could not listen on ports 80 and 443. NIC's image gives its NGINX binary the file
capability instead; a file capability would make NGINX fail to execute at all
where the capability is dropped (as deploy/ drops every one), so ferryman raises
it as an ambient capability in the child, just before it executes the server.
Ambient capabilities survive ``no_new_privs`` (allowPrivilegeEscalation: false)
and reach a program without file capabilities unchanged.
"""

from __future__ import annotations

import ctypes
import os

CAP_NET_BIND_SERVICE = 10  # linux/capability.h
_CAPABILITY_VERSION_3 = 0x20080522
_PR_CAP_AMBIENT = 47  # linux/prctl.h
_PR_CAP_AMBIENT_RAISE = 2

_LIBC = ctypes.CDLL(None, use_errno=True)


class _Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _Data(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def pass_on_bind_capability() -> None:
    """In the child before exec: the program executed next keeps
    CAP_NET_BIND_SERVICE when this process holds it (permitted) and is not root
    (root's programs get every capability of the bounding set anyway). Best
    effort: where the kernel refuses, the server starts without it and says so
    when it cannot bind a port."""
    if os.geteuid() == 0:
        return
    header = _Header(_CAPABILITY_VERSION_3, 0)
    data = (_Data * 2)()
    if _LIBC.capget(ctypes.byref(header), data) != 0:
        return
    bit = 1 << CAP_NET_BIND_SERVICE
    if not data[0].permitted & bit:
        return
    # An ambient capability must be permitted and inheritable; a process may
    # make any permitted one inheritable.
    data[0].inheritable |= bit
    if _LIBC.capset(ctypes.byref(header), data) != 0:
        return
    _LIBC.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_RAISE, CAP_NET_BIND_SERVICE, 0, 0)
