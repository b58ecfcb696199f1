"""Per-route proxy buffers without a reload: fixed buffer tiers.

``proxy_buffer_size``, ``proxy_buffers`` and ``proxy_busy_buffers_size`` take
no variables, and ferryman's one public server is never re-rendered per
resource. So nginx.conf declares the slow path's location once per *tier*
(``@ferryman_b<kib>``, and ``@ferryman_unbuffered_b<kib>`` with
``proxy_buffering off``), and a route that asks for buffers carries the flag
``b<kib>`` in its V record (``ingress_vs``, ``virtualserver``);
``ferryman_vs.lua`` sends its requests there with ``ngx.exec``, as it sends
unbuffered routes to ``@ferryman_unbuffered``. Tier ``S`` is NGINX's default
shape scaled to ``S``::

    proxy_buffer_size S; proxy_buffers 8 S; proxy_busy_buffers_size 2S;

(valid for NGINX: busy >= max(buffer size, one buffer) and < 7 buffers). A
route gets the smallest tier whose every value is at least what it asked for:
``S >= proxy-buffer-size``, ``S >= the size of one of proxy-buffers``,
``8 S >= their total`` and ``2 S >= proxy-busy-buffers-size``. Above the
largest tier the ask is refused with a Warning naming the maximum, and the
server's buffers (NGINX's defaults or the ConfigMap's keys) apply, as they do
to every route that asks for nothing.

A gRPC route stays in ``@ferryman_grpc``: ``proxy_*`` buffers do not apply to
``grpc_pass`` (NIC writes them into its gRPC locations, where NGINX ignores
them), so the flag is not read there.

The number of locations: 2 (buffered, unbuffered) x ``len(TIERS_KIB)``,
fourteen, and the two without a tier, each also with ``proxy_request_buffering
off`` (``streamed_``): 32 copies of ``slow-path.conf.tmpl``; rendering them
costs nothing measurable in a reload, and a buffer is only allocated by a
request of a route that asked for its tier.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Powers of two from NGINX's default (one 4k page on x86) to 256k, which
# covers the values NIC users write for large headers and cookies
# ("proxy-buffer-size: 128k", "proxy-buffers: 4 256k").
TIERS_KIB = (4, 8, 16, 32, 64, 128, 256)
BUFFERS = 8  # proxy_buffers' number in every tier (NGINX's default count)
BUSY = 2  # proxy_busy_buffers_size = BUSY x the tier (NGINX's default factor)

LARGEST = f"proxy_buffer_size {TIERS_KIB[-1]}k, proxy_buffers {BUFFERS} {TIERS_KIB[-1]}k, "
LARGEST += f"proxy_busy_buffers_size {BUSY * TIERS_KIB[-1]}k"


@dataclass(frozen=True)
class BufferAsk:
    """What a route asks for, in bytes; None: not asked."""

    buffer_size: int | None = None
    buffers: tuple[int, int] | None = None  # (number, size of one)
    busy_buffers_size: int | None = None

    def asked(self) -> bool:
        return (
            self.buffer_size is not None
            or self.buffers is not None
            or self.busy_buffers_size is not None
        )


class TooLarge(ValueError):
    """An ask above the largest tier."""


def needed_bytes(ask: BufferAsk) -> int:
    """The smallest tier size ``S`` (bytes, not rounded to a tier) that gives
    ``ask`` at least what it asks for."""
    need = 0
    if ask.buffer_size is not None:
        need = max(need, ask.buffer_size)
    if ask.buffers is not None:
        number, size = ask.buffers
        need = max(need, size, math.ceil(number * size / BUFFERS))
    if ask.busy_buffers_size is not None:
        need = max(need, math.ceil(ask.busy_buffers_size / BUSY))
    return need


def tier_kib(ask: BufferAsk) -> int | None:
    """The tier (KiB) for ``ask``: None when it asks for nothing; ``TooLarge``
    (its message names the largest tier) above the largest."""
    if not ask.asked():
        return None
    need = needed_bytes(ask)
    for kib in TIERS_KIB:
        if kib * 1024 >= need:
            return kib
    raise TooLarge(f"above ferryman's largest buffer tier ({LARGEST}); the server's buffers apply")


def parse_buffers(value: str) -> tuple[int, int] | None:
    """``proxy-buffers``' "<number> <size>" (validated already: NIC's rule) as
    (number, bytes of one); None if it does not read."""
    parts = value.split()
    if len(parts) != 2 or not parts[0].isdigit():
        return None
    size = parts[1]
    scale = {"k": 1024, "m": 1024 * 1024}.get(size[-1:].lower(), 1)
    digits = size[:-1] if scale != 1 else size
    if not digits.isdigit():
        return None
    return int(parts[0]), int(digits) * scale


def slow_variants() -> list[tuple[str, int]]:
    """The slow path's locations in the public server: (variant, tier KiB or
    0); the location is ``@ferryman_<variant>`` (``@ferryman`` for ""). Each
    once more as ``streamed_<variant>``, with ``proxy_request_buffering off``
    (ingress-nginx's proxy-request-buffering: "off", the route flag ``s``)."""
    out: list[tuple[str, int]] = [("", 0), ("unbuffered", 0)]
    for kib in TIERS_KIB:
        out += [(f"b{kib}", kib), (f"unbuffered_b{kib}", kib)]
    return out + [(f"streamed_{v}" if v else "streamed", kib) for v, kib in out]


MIXED_BUFFERING = (
    "proxies to upstreams with buffering on and off: the location takes one "
    "proxy_buffering, so the route is buffered"
)


def route_flags(upstreams: list[tuple[int | None, bool]]) -> tuple[str, str | None]:
    """A VirtualServer route's flags from the (tier, unbuffered) of each
    upstream it proxies to: ``u`` when every one is unbuffered, the largest
    tier asked for (every upstream gets at least its own), and a warning when
    buffering is mixed."""
    flags = ""
    why = None
    unbuffered = [off for _, off in upstreams]
    if unbuffered and all(unbuffered):
        flags = "u"
    elif any(unbuffered):
        why = MIXED_BUFFERING
    tiers = [kib for kib, _ in upstreams if kib is not None]
    if tiers:
        flags += f"b{max(tiers)}"
    return flags, why
