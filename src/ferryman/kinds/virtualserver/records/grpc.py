"""gRPC routes: a VirtualServer upstream's ``type: grpc`` (and an Ingress's
``nginx.org/grpc-services``, ``kinds/ingress/records/as_virtualserver.py``), without a reload.

NIC writes a location with ``grpc_pass grpc://<upstream>`` (``grpcs://`` with
``tls.enable``) for each route to a gRPC upstream. ferryman declares one such
location once in nginx.conf (``@ferryman_grpc``, templates/grpc-locations.conf.tmpl)
whose upstream's balancer picks the peer from the pushed endpoint sets; a route
of a gRPC upstream carries the flag ``g`` in the V record (the R item's ninth
field, ``kinds/virtualserver/records/virtualserver.py``) and ``dataplane/lua/ferryman_vs.lua`` sends
its requests there (``ngx.exec``). A new gRPC route is then a push, as any route.

NIC's rules kept here:

- gRPC needs HTTP/2 (the ConfigMap's ``http2``) and TLS termination (a client
  reaches NGINX's HTTP/2 only through TLS's ALPN); without them NIC still writes
  ``grpc_pass``, warning "gRPC cannot be configured for upstream ...": the same
  (``upstream_warning``);
- on a gRPC location, the errors NGINX answers itself (400, 401, ..., 502, 503,
  504) become gRPC statuses (the template's error locations); an errorPage for
  one of those codes is ignored, with NIC's warning (``grpc_pages``).

One location per route is where ferryman differs: a route whose actions proxy
to gRPC and HTTP upstreams both (NIC writes a location per split) is proxied as
HTTP, with a warning (``route_is_grpc``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator

from ferryman.kinds.virtualserver.parse.action import Action, ErrorPage, Pass, Proxy
from ferryman.kinds.virtualserver.parse.route import Route
from ferryman.resources.nic_upstream import Upstream

GRPC_FLAG = "g"  # the R item's flag for a gRPC route (ferryman_vs.lua reads it)

# NIC's grpcConflictingErrors (virtualserver.go): the codes its gRPC location
# maps to gRPC statuses, which an errorPage cannot then take.
CONFLICTING = frozenset(
    [400, 401, 403, 404, 405, 408, 413, 414, 415, 426, 429, 495, 496, 497, 500, 501, 502, 503, 504]
)

MIXED = (
    "proxies to gRPC and HTTP upstreams, which ferryman serves from one location per "
    "route; proxied as HTTP"
)


def is_grpc(u: Upstream) -> bool:
    return u.type == "grpc"


def upstream_warning(u: Upstream, ready: bool) -> str | None:
    """NIC's warning for a gRPC upstream of a VirtualServer whose host lacks
    TLS termination or HTTP/2 (``ready``: has both); its routes stay gRPC, as
    NIC's do."""
    if not is_grpc(u) or ready:
        return None
    return (
        f"gRPC cannot be configured for upstream {u.name}. "
        "gRPC requires enabled HTTP/2 and TLS termination"
    )


def _actions(r: Route) -> Iterator[Action]:
    if r.action is not None:
        yield r.action
    yield from (s.action for s in r.splits)
    for m in r.matches:
        if m.action is not None:
            yield m.action
        yield from (s.action for s in m.splits)


def proxied(r: Route) -> set[str]:
    """The upstream names ``r``'s actions pass or proxy to."""
    return {a.upstream for a in _actions(r) if isinstance(a, Pass | Proxy)}


def route_is_grpc(r: Route, grpc_upstreams: Collection[str]) -> tuple[bool, str | None]:
    """Whether ``r`` is a gRPC route (every upstream it proxies to is one of
    ``grpc_upstreams``), and the warning when it mixes gRPC and HTTP ones."""
    names = proxied(r)
    grpc = {n for n in names if n in grpc_upstreams}
    if not grpc:
        return False, None
    if grpc != names:
        return False, MIXED
    return True, None


def grpc_pages(
    pages: tuple[ErrorPage, ...], upstreams: Collection[str]
) -> tuple[tuple[ErrorPage, ...], list[str]]:
    """The error pages a gRPC route keeps (without the codes NIC's gRPC
    location maps) and NIC's warning per gRPC upstream when codes are dropped."""
    dropped = [c for page in pages for c in page.codes if c in CONFLICTING]
    if not dropped:
        return pages, []
    kept = []
    for page in pages:
        codes = tuple(c for c in page.codes if c not in CONFLICTING)
        if codes:
            kept.append(ErrorPage(codes, page.response))
    listed = " ".join(str(c) for c in dropped)
    warnings = [
        f"The error page configuration for the upstream {name} is ignored for status "
        f"code(s) [{listed}], which cannot be used for GRPC upstreams."
        for name in sorted(upstreams)
    ]
    return tuple(kept), warnings
