"""Requests to one of ferryman's listeners by port (custom listeners and listen-ports).

Moved from tests/integration/test_vs_listeners.py, whose tests and others share them."""

from __future__ import annotations

import httpx

from testkit.harness import (
    Response,
    _insecure_context,
)


def get_on(
    port: int, host: str, path: str, *, https: bool = False, address: str = "127.0.0.1"
) -> Response:
    """A request to ``address``:``port``, for ``host`` (and its SNI name)."""
    scheme = "https" if https else "http"
    ext = {"sni_hostname": host} if https else {}
    where = f"[{address}]" if ":" in address else address
    with httpx.Client(verify=_insecure_context(), timeout=10) as c:
        req = c.build_request(
            "GET", f"{scheme}://{where}:{port}{path}", headers={"Host": host}, extensions=ext
        )
        r = c.send(req, follow_redirects=False)
    return Response(r.status_code, r.headers, r.text)
