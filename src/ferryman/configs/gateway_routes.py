"""One listener hostname's HTTPRoute matches -> a V record the Lua router
evaluates in order (dataplane/lua/ferryman_vs.lua, its G items).

Gateway API's precedence is not NGINX's location choice: the matches are
already ordered (``gateway_attach``), and a request takes the first whose path,
method, headers and query parameters all hold, falling through to the next when
one does not. So the record is ``- U... G...`` (the V record's layout, no
redirect), each G item one match:

  ``G|<e|p|r>|<path>|<conditions>|<splits>``

- ``e`` an exact path, ``p`` a path prefix compared element by element (its
  trailing slash dropped: ``/a/`` matches ``/a``, ``/a/b``, not ``/ab``), ``r`` a
  regular expression that must match the whole path;
- conditions ``&``-separated ``<variable>.<mode><value>`` (base64 each), mode
  ``=`` equal (case-sensitive) or ``~`` a regular expression: the method is
  ``request_method``, a header ``http_<name>``, a query parameter ``arg_<name>``;
- splits ``,``-separated ``<weight>:<action>`` as in VirtualServer records
  (``p.<upstream>..`` to proxy, ``t.500...`` for an invalid backend's share or a
  rule with no usable backend; the router picks by weight out of their sum).

Every string from the route is base64, as in every V record.
"""

from __future__ import annotations

import base64

from ferryman.configs.gateway_attach import RouteEntry
from ferryman.configs.model import BackendKey, backend_key
from ferryman.resources.gateway_api import Match

# The answer for requests an invalid backend would have had, or a rule with
# none (the specification: 500).
_ERROR = "t.500." + base64.b64encode(b"text/plain").decode() + ".."
_PATH_KINDS = {"Exact": "e", "PathPrefix": "p", "RegularExpression": "r"}


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode("ascii")


def gateway_record(entries: list[RouteEntry]) -> tuple[str, frozenset[BackendKey]]:
    """The V record for ``entries`` (in precedence order) and the backends it uses."""
    items = ["-"]
    upstreams: dict[BackendKey, int] = {}

    def upstream(key: BackendKey) -> int:
        if key not in upstreams:
            upstreams[key] = len(upstreams) + 1
            # round robin, max_fails 1, fail_timeout 10 s (NGINX's defaults), no
            # timeouts or tries of its own, no hash key, no upstream fields.
            items.append(f"U|{key}|rr|1|10|-|-|-|0||0.-.-.-.-")
        return upstreams[key]

    routes = []
    for entry in entries:
        splits = []
        for namespace, service, port, weight in entry.backends:
            if weight <= 0:
                continue
            if service is None:
                splits.append(f"{weight}:{_ERROR}")
            else:
                n = upstream(backend_key(namespace, service, str(port)))
                splits.append(f"{weight}:p.{n}..")
        if not splits:
            splits = [f"1:{_ERROR}"]
        routes.append(_item(entry.match, ",".join(splits)))
    return " ".join(items + routes), frozenset(upstreams)


def _item(m: Match, splits: str) -> str:
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
    return f"G|{_PATH_KINDS[m.path_type]}|{b64(path)}|{'&'.join(conditions)}|{splits}"
