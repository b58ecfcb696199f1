"""``nginx.org/sticky-cookie-services``: NGINX's ``sticky cookie`` per Service.

NIC (ParseStickyServiceList) takes ``serviceName=<svc> <parameters>``,
``;``-separated, and writes ``sticky cookie <parameters>;`` into the Service's
upstream unchanged (NGINX 1.29.6 or NGINX Plus then parses them). ferryman's
balancers do it per request (ferryman_sticky.lua), so the parameters are
parsed here, with NGINX's grammar: ``name [expires=time|max]
[domain=domain] [httponly] [samesite=strict|lax|none] [secure]
[path=path]``. NIC's messages for the list's format; a parameter NGINX would
not take is NIC's "invalid sticky-cookie parameters".
"""

from __future__ import annotations

import re
from dataclasses import replace

from ferryman.resources import nic_rules
from ferryman.resources.sticky_cookie import DOMAIN, EXPIRES_MAX, NAME, PATH, SAMESITE, StickyCookie

# NIC's stickyCookieRegex: no '"', '$' or trailing '\'.
_NIC_PARAMETERS = re.compile(r'([^"$\\]|\\[^$])*')


class StickyError(ValueError):
    """NIC's message for the annotation's value (ingress_annotations reads it)."""


def parse_sticky_services(value: str) -> dict[str, StickyCookie]:
    """The Services' cookies; StickyError with NIC's message."""
    out: dict[str, StickyCookie] = {}
    for part in value.split(";"):
        pieces = part.split(" ", 1)
        if len(pieces) != 2:
            raise StickyError(
                f"invalid sticky-cookie service format: {part}. Must be a semicolon-separated "
                "list of sticky services"
            )
        service = pieces[0].split("=")
        if len(service) != 2:
            raise StickyError(f"invalid sticky-cookie service format: [{' '.join(service)}]")
        cookie = _cookie(pieces[1])
        if cookie is None:
            raise StickyError(f"invalid sticky-cookie parameters: {pieces[1]}")
        out[service[1]] = cookie
    return out


def _cookie(parameters: str) -> StickyCookie | None:
    if not _NIC_PARAMETERS.fullmatch(parameters):
        return None
    words = parameters.split()
    if not words or not NAME.fullmatch(words[0]):
        return None
    cookie = StickyCookie(words[0])
    seen: set[str] = set()
    for word in words[1:]:
        key, _, arg = word.partition("=")
        if key in seen:
            return None
        seen.add(key)
        if key == "expires" and arg == "max":
            cookie = replace(cookie, expires=EXPIRES_MAX)
        elif key == "expires":
            ms = nic_rules.time_ms(arg)
            if ms is None:
                return None
            cookie = replace(cookie, expires=ms // 1000)
        elif key == "domain" and DOMAIN.fullmatch(arg):
            cookie = replace(cookie, domain=arg)
        elif key == "path" and PATH.fullmatch(arg):
            cookie = replace(cookie, path=arg)
        elif key == "samesite" and arg.lower() in SAMESITE:
            cookie = replace(cookie, samesite=arg.lower())
        elif word == "httponly":
            cookie = replace(cookie, httponly=True)
        elif word == "secure":
            cookie = replace(cookie, secure=True)
        else:
            return None
    return cookie
