"""A proxy action's ``responseHeaders.pass`` and ``.ignore`` (NIC's
``proxy_pass_header`` and ``proxy_ignore_headers``), per request.

``pass``: NGINX hides Date, Server, X-Pad and X-Accel-* from the upstream's
response by default; ``ferryman_vs_upstream.lua`` puts a passed one back from
``$upstream_http_<name>`` in the header filter (every other header is passed
already).

``ignore``: what NGINX does with each of NIC's ignorable headers, without a
``proxy_cache`` (ferryman has none):

- Expires, Cache-Control, Set-Cookie, Vary, X-Accel-Expires: read for caching
  only, so ignoring them changes nothing;
- X-Accel-Charset: overrides the charset only for charsets some ``charset_map``
  or ``charset`` directive declares, and ferryman's configuration declares none
  (NGINX 1.22 leaves the response as it is and logs "unknown charset ... to
  override", which an ignoring route still logs);
- X-Accel-Limit-Rate: sets the response's rate before the header filter, which
  sets it back (``$limit_rate``) when the route ignores it;
- X-Accel-Redirect (an internal redirect) and X-Accel-Buffering (buffering of
  the response) act before any Lua phase sees the response, and only
  ``proxy_ignore_headers``, which takes no variable, stops them: ``Warning``.
"""

from __future__ import annotations

from collections.abc import Iterable

UNIGNORABLE = (
    "acts before any per-request code runs (proxy_ignore_headers takes no variable); not ignored"
)
_UNIGNORABLE = frozenset(["x-accel-redirect", "x-accel-buffering"])


def unignorable(names: Iterable[str]) -> list[tuple[int, str]]:
    """The (index, name) of the ignored headers ferryman cannot ignore."""
    return [(i, n) for i, n in enumerate(names) if n.lower() in _UNIGNORABLE]
