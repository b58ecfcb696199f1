"""A sticky cookie as the U item's twelfth field, which ferryman_sticky.lua reads
for Ingress and VirtualServer upstreams alike."""

from __future__ import annotations

from ferryman.configs.record_text import b64
from ferryman.resources.sticky_cookie import StickyCookie


def sticky_field(cookie: StickyCookie) -> str:
    """``<name>~<expires>~<domain>~<path>~<samesite>~<flags>``: strings base64,
    expires in seconds (-1 none, -2 max), flags ``h`` httponly, ``s`` secure
    and ``c`` SameSite=None only for the clients that take it."""
    flags = (
        ("h" if cookie.httponly else "")
        + ("s" if cookie.secure else "")
        + ("c" if cookie.samesite_none_conditional else "")
    )
    strings = (cookie.domain, cookie.path, cookie.samesite)
    return "~".join([b64(cookie.name), str(cookie.expires), *(b64(x) for x in strings), flags])
