"""NGINX's ``sticky cookie`` as both kinds ask for it: the Ingress annotation
``nginx.org/sticky-cookie-services`` (kinds/ingress/parse/sticky.py) and a
VirtualServer upstream's ``sessionCookie`` (resources/nic_upstream.py).

NGINX 1.29.6 (NGINX Plus before it) has the directive; ferryman's slow-path
balancer does it per request (ferryman_sticky.lua), from the U item's field
``configs/sticky_field.py`` writes. The value rules are what a Set-Cookie
carries as is, so nothing here needs quoting downstream.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A cookie name (RFC 6265 token), a domain, a path: what a Set-Cookie carries as is.
NAME = re.compile(r"[A-Za-z0-9!#%&'*+.^_`|~-]+", re.ASCII)
DOMAIN = re.compile(r"\.?[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*", re.ASCII)
# Printable ASCII but for space, '"', ',', ';' and '\\'.
PATH = re.compile(r"/[\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]*")
SAMESITE = ("strict", "lax", "none")
EXPIRES_MAX = -2  # NGINX's expires=max


@dataclass(frozen=True)
class StickyCookie:
    name: str
    expires: int = -1  # seconds; -1: a session cookie, EXPIRES_MAX: max
    domain: str = ""
    path: str = ""
    httponly: bool = False
    secure: bool = False
    samesite: str = ""  # strict, lax, none; "": not sent
    # ingress-nginx's session-cookie-conditional-samesite-none: SameSite=None
    # left out for the clients that reject such a cookie or read it as Strict.
    samesite_none_conditional: bool = False
