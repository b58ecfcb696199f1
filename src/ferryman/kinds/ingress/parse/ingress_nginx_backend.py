"""ingress-nginx's ``default-backend`` annotation: a Service of the Ingress's
namespace that serves the Ingress's requests while the Service a path routes
to has no endpoint (ingress-nginx's custom default backend, on the Service's
first port), instead of a 503.

With ``custom-http-errors`` it also answers the responses of the listed codes,
the upstream's and NGINX's own (a 502 when no peer answers), as ingress-nginx's
custom error pages: told the code and the request in X-Code, X-Format,
X-Original-URI, ... (dataplane/lua/ferryman_custom_errors.lua). NGINX's
``error_page`` takes no variable, so ngx_http_ferryman_module gives each such
request error pages of its own (ngx_http_ferryman_errors.c): no reload, for any
set of codes. ingress-nginx sends them to the controller's default backend
without the annotation; ferryman has no controller-wide default backend (nor
has NIC), so there the codes are not applied, in a Warning.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

PREFIX = "nginx.ingress.kubernetes.io/"
KEY = "default-backend"
# A Service's name (DNS-1035 label).
_SERVICE = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")


def fallback_service(annotations: Mapping[str, str], warnings: list[str]) -> str | None:
    """The Service named by ``default-backend`` (None: none, or not applied,
    said in ``warnings``)."""
    raw = annotations.get(PREFIX + KEY)
    if raw is None:
        return None
    name = raw.strip()
    if "/" in name:
        warnings.append(
            f"annotation {PREFIX}{KEY}: {raw!r}: ferryman reads a Service of the Ingress's "
            "namespace (name it without a namespace): not applied"
        )
        return None
    if not _SERVICE.fullmatch(name):
        warnings.append(f"annotation {PREFIX}{KEY}: {raw!r} is not a Service name: not applied")
        return None
    return name


ERRORS_KEY = "custom-http-errors"
# NGINX's error_page takes 300-599; ingress-nginx's are error responses.
_LOWEST, _HIGHEST = 400, 599
# The module's bound (FERRYMAN_ERROR_PAGES_MAX in ngx_http_ferryman_errors.c).
MAX_CODES = 32


def error_codes(
    annotations: Mapping[str, str], fallback: str | None, warnings: list[str]
) -> tuple[int, ...]:
    """The codes ``custom-http-errors`` lists, sorted, for ``fallback`` (the
    default-backend) to answer; () when none or not applied (said in ``warnings``)."""
    raw = annotations.get(PREFIX + ERRORS_KEY)
    if raw is None:
        return ()
    name = PREFIX + ERRORS_KEY
    parts = [p.strip() for p in raw.split(",") if p.strip()]
    if not parts or not all(p.isascii() and p.isdigit() and len(p) == 3 for p in parts):
        warnings.append(f"annotation {name}: {raw!r} is not a list of status codes: not applied")
        return ()
    codes = sorted({int(p) for p in parts})
    if not all(_LOWEST <= c <= _HIGHEST for c in codes):
        warnings.append(f"annotation {name}: {raw!r}: codes are {_LOWEST}-{_HIGHEST}: not applied")
        return ()
    if len(codes) > MAX_CODES:
        warnings.append(f"annotation {name}: {raw!r}: more than {MAX_CODES} codes: not applied")
        return ()
    if fallback is None:
        warnings.append(
            f"annotation {name} is not applied: it needs {PREFIX}{KEY} (ferryman has no "
            "controller-wide default backend to send the errors to)"
        )
        return ()
    return tuple(codes)
