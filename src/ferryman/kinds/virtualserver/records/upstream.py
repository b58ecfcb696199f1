"""A VirtualServer upstream's fields evaluated per request (``ferryman_vs_upstream.lua``),
and those that would need NGINX directives per resource.

The U record's last field (``kinds/virtualserver/records/virtualserver.py``) is
``<tls>.<max_conns>.<client_max_body_size>.<next_upstream_timeout>.<keepalive>``:
``1`` for TLS to the backend (``proxy_pass https://``, as NIC writes for
``tls.enable``), the limits as integers (bytes, milliseconds), ``-`` when unset.

What each becomes, against NIC's template (nginx.virtualserver.tmpl):

- ``tls.enable``: ``proxy_pass https://`` to ``ferryman_backend_tls`` (the
  target a variable set per request; an upstream block of its own, so kept
  TLS connections and plain ones are separate pools);
- ``max-conns``: NGINX's ``server ... max_conns=``, a peer with that many
  requests in flight (counted across workers, as NIC's upstream ``zone`` does)
  is skipped, and none left is NGINX's 502;
- ``client-max-body-size``: NGINX's 413 for a Content-Length above it, below
  or above the server's own (the router's location takes any body and checks
  the route's limit itself); a chunked body is measured once read (as
  ``proxy_request_buffering`` reads it anyway) up to the server's limit, above
  which NGINX refuses it while reading;
- ``next-upstream-timeout``: no next attempt once that long has passed since
  the first, the last failure's status answered (NGINX's
  ``proxy_next_upstream_timeout``), for NGINX's default conditions
  ``error timeout``;
- ``keepalive``: NIC sends ``Connection: close`` without it (``0``); above 0
  connections are kept and reused, from ferryman's shared pool (64 idle per
  worker): NGINX's ``keepalive`` sizes a pool per ``upstream`` block and takes
  no variable, so the number itself does not size anything (unset: ferryman's
  default, kept).

``buffering``, ``buffers``, ``buffer-size`` and ``busy-buffers-size`` take
no variable either; they become route flags (``buffer_tier``): the slow
path's location with ``proxy_buffering off`` and/or of a buffer tier
(``configs/buffer_tiers.py``), declared once in nginx.conf.

The rest take no variable in NGINX (``proxy_next_upstream``,
``client_body_buffer_size``), and ``subselector`` needs every pod's labels:
they stay ``Warning`` (``unsupported``; docs/virtualserver.md says why, and
``bench/vs_directives_reload.py`` measures what rendering them would cost).
``type: grpc`` is a route flag (``kinds/virtualserver/records/grpc.py``).
"""

from __future__ import annotations

from ferryman.configs.buffer_tiers import BufferAsk, TooLarge, tier_kib
from ferryman.resources.nic_upstream import Upstream


def _number(value: int | None) -> str:
    return "-" if value is None else str(value)


def upstream_fields(u: Upstream) -> str:
    """The U record's last field for ``u``."""
    timeout = u.next_upstream_timeout_ms
    body = u.client_max_body_size
    return ".".join(
        [
            "1" if u.tls else "0",
            _number(u.max_conns or None),  # 0: no limit, as NGINX's max_conns=0
            _number(body),  # 0: no limit, as NGINX's client_max_body_size 0
            _number(timeout or None),
            _number(u.keepalive),
        ]
    )


def unsupported(u: Upstream) -> dict[str, str]:
    """The fields of ``u`` ferryman does not apply: field -> why."""
    out: dict[str, str] = {}
    if u.subselector:
        out["subselector"] = (
            "not implemented: ferryman watches pods only in namespaces opted in to "
            "its readiness gate, so it cannot select endpoints by pod labels"
        )
    if u.next_upstream and set(u.next_upstream) != {"error", "timeout"}:
        out["next-upstream"] = "proxy_next_upstream takes no variable; ignored"
    tier, too_large = buffer_tier(u)
    if u.type == "grpc" and (tier is not None or too_large or u.buffering is not None):
        # NIC writes them into the gRPC location too, where grpc_pass ignores them.
        out[_asked_buffers(u)] = "does not apply to a gRPC upstream (grpc_pass); ignored"
    elif too_large is not None:
        out[_asked_buffers(u)] = too_large
    directives = {
        "client-body-buffer-size": (
            u.client_body_buffer_size is not None,
            "client_body_buffer_size",
        ),
    }
    for field, (used, directive) in directives.items():
        if used:
            out[field] = f"{directive} takes no variable; ignored"
    return out


def buffer_tier(u: Upstream) -> tuple[int | None, str | None]:
    """The buffer tier (KiB) ``u``'s buffers ask for (None: the server's), or
    why none is large enough."""
    ask = BufferAsk(
        buffer_size=u.buffer_size,
        buffers=(u.buffers.number, u.buffers.size) if u.buffers else None,
        busy_buffers_size=u.busy_buffers_size,
    )
    try:
        return tier_kib(ask), None
    except TooLarge as e:
        return None, str(e)


def _asked_buffers(u: Upstream) -> str:
    """The buffer fields ``u`` sets, as one warning's field name."""
    fields = [
        name
        for name, value in (
            ("buffering", u.buffering),
            ("buffer-size", u.buffer_size),
            ("buffers", u.buffers),
            ("busy-buffers-size", u.busy_buffers_size),
        )
        if value is not None
    ]
    return ",".join(fields)
