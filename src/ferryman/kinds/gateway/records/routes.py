"""One listener hostname's HTTPRoute matches -> a V record the Lua router
evaluates in order (dataplane/lua/ferryman_vs.lua, its G items).

Gateway API's precedence is not NGINX's location choice: the matches are
already ordered (``gateway_attach``), and a request takes the first whose path,
method, headers and query parameters all hold, falling through to the next when
one does not. So the record is ``- U... G...`` (the V record's layout, no
redirect), each G item one match:

  ``G|<e|p|r>|<path>|<conditions>|<splits>|<filters>``

- ``e`` an exact path, ``p`` a path prefix compared element by element (its
  trailing slash dropped: ``/a/`` matches ``/a``, ``/a/b``, not ``/ab``), ``r`` a
  regular expression that must match the whole path;
- conditions ``&``-separated ``<variable>.<mode><value>`` (base64 each), mode
  ``=`` equal (case-sensitive) or ``~`` a regular expression: the method is
  ``request_method``, a header ``http_<name>``, a query parameter ``arg_<name>``;
- splits ``,``-separated ``<weight>:<action>`` as in VirtualServer records
  (``p.<upstream>..`` to proxy, ``t.500...`` for an invalid backend's share or a
  rule with no usable backend; the router picks by weight out of their sum);
- filters ``;``-separated ``<letter>:<payload>``: ``q`` and ``r`` the request's
  and the response's header changes, ``^``-separated ``s~<name>~<value>`` (set),
  ``a~<name>~<value>`` (add), ``x~<name>`` (remove); ``d`` a redirect
  ``<code>~<scheme>~<hostname>~<port>~<f|p|>~<path>``; ``w`` a rewrite
  ``<hostname>~<f|p|>~<path>`` (``f`` the full path, ``p`` the matched prefix
  replaced; empty fields keep the request's); ``m`` mirrors,
  ``^``-separated ``<upstream>~<percent>`` (each request is copied to that
  upstream with that probability; its answer is ignored); ``b`` and ``c`` a
  backendRef's request and response header changes, ``<split>@<changes>``
  (``split`` 1-based, in the splits' order), applied after the rule's when
  that split is picked; ``t`` the rule's timeout in seconds (the shorter of
  timeouts.request and timeouts.backendRequest): NGINX's connect, send and
  read timeouts of each attempt; ``o`` CORS
  ``<origins>~<methods>~<allow headers>~<expose headers>~<max age>~<credentials 0|1>``,
  the origins one regular expression (``*`` for any), the lists ``, ``-joined
  (ferryman_gateway_cors.lua answers preflights and adds the headers); ``g``
  (no payload) a GRPCRoute's match: the router goes on in the gRPC location
  (grpc_pass over HTTP/2, grpc-locations.conf.tmpl), and an invalid
  backend's share is answered 503, which gRPC clients read as UNAVAILABLE
  (what the specification asks of a GRPCRoute); ``h`` the splits (1-based,
  ``^``-separated) whose backends speak h2c (their Service port's appProtocol
  ``kubernetes.io/h2c``, records/backend_protocols.py): a request that picks
  one goes on in the h2c location (grpc_pass of a plain HTTP request over
  HTTP/2), where it picks again among those splits alone, so each backend
  keeps its share.

A backend a BackendTLSPolicy names (records/backend_tls.py) is spoken to in
TLS: its U item's fields say ``1`` (TLS) and, after an empty sticky field,
``<CAs>.<hostname>.<SANs>`` (ferryman_gateway_tls.lua verifies with them per
request); one whose policy is not accepted is answered as an invalid backend.

Every string from the route is base64, as in every V record.
"""

from __future__ import annotations

import base64
import re

from ferryman.configs.model import BackendKey, backend_key
from ferryman.configs.record_text import b64
from ferryman.kinds.gateway.parse.cors import Cors
from ferryman.kinds.gateway.parse.filters import Filter, HeaderChanges
from ferryman.kinds.gateway.parse.gateway_api import Match
from ferryman.kinds.gateway.parse.grpc_route import GRPCMatch
from ferryman.kinds.gateway.records.attach import RouteEntry
from ferryman.kinds.gateway.records.backend_tls import BackendTLS

# The answer for requests an invalid backend would have had, or a rule with
# none (the specification: 500).
_ERROR = "t.500." + base64.b64encode(b"text/plain").decode() + ".."
_GRPC_ERROR = "t.503." + base64.b64encode(b"text/plain").decode() + ".."
_PATH_KINDS = {"Exact": "e", "PathPrefix": "p", "RegularExpression": "r"}


def gateway_record(entries: list[RouteEntry]) -> tuple[str, frozenset[BackendKey]]:
    """The V record for ``entries`` (in precedence order) and the backends it uses."""
    items = ["-"]
    upstreams: dict[BackendKey, int] = {}

    def upstream(key: BackendKey, tls: BackendTLS | None = None) -> int:
        if key not in upstreams:
            upstreams[key] = len(upstreams) + 1
            # round robin, max_fails 1, fail_timeout 10 s (NGINX's defaults), no
            # timeouts or tries of its own, no hash key, no upstream fields
            # but TLS (a BackendTLSPolicy's, with how to verify).
            fields = "0.-.-.-.-" if tls is None else f"1.-.-.-.-||{tls.item()}"
            items.append(f"U|{key}|rr|1|10|-|-|-|0||{fields}")
        return upstreams[key]

    routes = []
    for entry in entries:
        grpc = isinstance(entry.match, GRPCMatch)
        error = _GRPC_ERROR if grpc else _ERROR
        splits = []
        per_backend = []
        backend_filters = entry.backend_filters or ((),) * len(entry.backends)
        h2c_marks = entry.h2c or (False,) * len(entry.backends)
        tls_of = entry.tls or (None,) * len(entry.backends)
        h2c = []
        for (namespace, service, port, weight), own, is_h2c, tls in zip(
            entry.backends, backend_filters, h2c_marks, tls_of, strict=True
        ):
            if weight <= 0:
                continue
            if service is None or (tls is not None and not tls.usable):
                splits.append(f"{weight}:{error}")
            else:
                n = upstream(backend_key(namespace, service, str(port)), tls)
                splits.append(f"{weight}:p.{n}..")
                per_backend += _backend_filters(len(splits), own)
                if is_h2c:
                    h2c.append(str(len(splits)))
        if not splits:
            splits = [f"1:{error}"]
        filters = ";".join(f for f in (_filters(entry.rule.filters), *per_backend) if f)
        rule = entry.rule
        timeout = min((t for t in (rule.request_timeout, rule.backend_timeout) if t), default=0)
        if timeout:
            filters = ";".join(f for f in (filters, f"t:{timeout:g}") if f)
        if entry.mirrors:
            mirrors = "^".join(
                f"{upstream(backend_key(ns, svc, str(port)))}~{percent:g}"
                for ns, svc, port, percent in entry.mirrors
            )
            filters = ";".join(f for f in (filters, f"m:{mirrors}") if f)
        if grpc:
            filters = ";".join(f for f in (filters, "g:") if f)
        elif h2c:
            filters = ";".join(f for f in (filters, "h:" + "^".join(h2c)) if f)
        routes.append(_item(entry.match, ",".join(splits), filters))
    return " ".join(items + routes), frozenset(upstreams)


def _backend_filters(split: int, filters: tuple[Filter, ...]) -> list[str]:
    """A backendRef's header changes, for the split it is (1-based): ``b``
    request, ``c`` response, ``<split>@<changes>``."""
    out = []
    for f in filters:
        if f.headers is None:
            continue
        letter = "b" if f.type == "RequestHeaderModifier" else "c"
        out.append(f"{letter}:{split}@{_headers(f.headers)}")
    return out


def _headers(changes: HeaderChanges) -> str:
    ops = [f"s~{b64(n)}~{b64(v)}" for n, v in changes.set]
    ops += [f"a~{b64(n)}~{b64(v)}" for n, v in changes.add]
    ops += [f"x~{b64(n)}" for n in changes.remove]
    return "^".join(ops)


def _filters(filters: tuple[Filter, ...]) -> str:
    out = []
    for f in filters:
        path_kind = "" if f.path is None else ("f" if f.path.type == "ReplaceFullPath" else "p")
        path = b64(f.path.value) if f.path is not None else ""
        if f.type == "RequestHeaderModifier" and f.headers is not None:
            out.append(f"q:{_headers(f.headers)}")
        elif f.type == "ResponseHeaderModifier" and f.headers is not None:
            out.append(f"r:{_headers(f.headers)}")
        elif f.type == "RequestRedirect":
            fields = [str(f.status_code or 302), b64(f.scheme or ""), b64(f.hostname or ""),
                      str(f.port or ""), path_kind, path]  # fmt: skip
            out.append("d:" + "~".join(fields))
        elif f.type == "URLRewrite":
            out.append("w:" + "~".join([b64(f.hostname or ""), path_kind, path]))
        elif f.type == "CORS" and f.cors is not None:
            out.append("o:" + _cors(f.cors))
    return ";".join(out)


def _cors(c: Cors) -> str:
    fields = (
        origin_regex(c.allow_origins) or "*",
        ", ".join(c.allow_methods),
        ", ".join(c.allow_headers),
        ", ".join(c.expose_headers),
    )
    return "~".join(
        [*(b64(f) for f in fields), str(c.max_age), "1" if c.allow_credentials else "0"]
    )


def _item(m: Match, splits: str, filters: str) -> str:
    path = m.path
    if m.path_type == "PathPrefix" and path != "/":
        path = path.rstrip("/")
    conditions = []
    if m.method:
        conditions.append(f"{b64('request_method')}.{b64('=' + m.method)}")
    for h in m.headers:
        variable = "http_" + h.name.lower().replace("-", "_")
        mode = "=" if h.type == "Exact" else "~"
        conditions.append(f"{b64(variable)}.{b64(mode + h.value)}")
    for q in m.query:
        mode = "=" if q.type == "Exact" else "~"
        conditions.append(f"{b64('arg_' + q.name)}.{b64(mode + q.value)}")
    kind = _PATH_KINDS[m.path_type]
    return f"G|{kind}|{b64(path)}|{'&'.join(conditions)}|{splits}|{filters}"


def origin_regex(origins: tuple[str, ...]) -> str | None:
    """One PCRE (matched caselessly) for the origins a rule allows; None for
    ``*`` (any). A ``*.`` label stands for one or more labels, a host of ``*``
    for any host; a port must be the same, and none means none."""
    if "*" in origins:
        return None
    alternatives = []
    for origin in origins:
        scheme, _, authority = origin.partition("://")
        host, colon, port = authority.partition(":")
        if host == "*":
            pattern = r"[a-z0-9-]+(?:\.[a-z0-9-]+)*"
        elif host.startswith("*."):
            pattern = r"[a-z0-9-]+(?:\.[a-z0-9-]+)*\." + re.escape(host[2:].lower())
        else:
            pattern = re.escape(host.lower())
        alternatives.append(
            re.escape(scheme.lower()) + "://" + pattern + (re.escape(colon + port) if colon else "")
        )
    return "^(?:" + "|".join(alternatives) + ")$"
