"""ingress-nginx's ``default-backend`` annotation: a Service of the Ingress's
namespace that serves the Ingress's requests while the Service a path routes
to has no endpoint (ingress-nginx's custom default backend, on the Service's
first port), instead of a 503.

With ``custom-http-errors`` ingress-nginx also sends it the responses of the
listed codes; ferryman does not yet (NGINX's ``error_page`` and
``proxy_intercept_errors`` take no variables, so per-route error codes would
need a location per set of codes): that annotation stays "not applied yet",
and the Warning says so.
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
