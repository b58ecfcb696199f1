"""Records -> the routes they serve, one row each, as a NIC user reads ``nginx -T``.

``ferryman render`` prints this table (and writes it as routes.txt) so that what
NGINX would serve is seen from the records themselves, the bytes the data plane
gets, not from the resources: a route a resource asked for but no record holds
is not in the table. One decoder for every kind, because the kinds share the
record grammars: an Ingress host is an H record (``configs/routes.py``), or a V
record when it needs the Lua router (``kinds/ingress/records/as_virtualserver.py``);
a VirtualServer (with its VirtualServerRoutes' subroutes) is a V record
(``kinds/virtualserver/records/virtualserver.py``); a Gateway listener's
HTTPRoutes are a W record holding a V record of G items
(``kinds/gateway/records/servers.py``, ``routes.py``); a TransportServer is an S
record (``kinds/transport/records/stream.py``). The F record repeats V's routes
for the C module, so it is not read here.

A row per way a request can go: each split of each match of each route, so
grepping a Service's name finds every path that reaches it. Cells never hold a
space (user strings with one are escaped), so ``awk`` reads the columns too;
ENDPOINTS, the last, is a space-separated list.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields

from ferryman.wire.records import Record, RecordKey

NONE = "-"

# A V record's path modifiers (NGINX's location modifiers) as the match's name.
_VS_PATHS = {"E": "Exact", "N": "Prefix^~", "P": "Prefix", "X": "Regex", "I": "RegexCaseless"}
# A G item's path kinds (Gateway API's names).
_GW_PATHS = {"e": "Exact", "p": "PathPrefix", "r": "RegularExpression"}
# A P item's letter -> the Policy field (kinds/policy/records/*.py, ``letter``).
_POLICIES = {
    "a": "accessControl",
    "b": "basicAuth",
    "c": "cors",
    "e": "egressMTLS",
    "j": "jwt",
    "k": "apiKey",
    "m": "ingressMTLS",
    "r": "rateLimit",
    "x": "externalAuth",
}
# A G item's filter letters (kinds/gateway/records/routes.py) -> Gateway API's names.
_FILTERS = {
    "q": "RequestHeaderModifier",
    "r": "ResponseHeaderModifier",
    "d": "RequestRedirect",
    "w": "URLRewrite",
    "m": "RequestMirror",
    "b": "backendRequestHeaderModifier",
    "c": "backendResponseHeaderModifier",
    "t": "timeout",
    "o": "CORS",
}


@dataclass(frozen=True)
class Row:
    """One way a request goes: where it comes in, what it must match, what is done."""

    object: str  # Kind/namespace/name of the resource the record is written for
    host: str  # the host (a TransportServer's listener, a Gateway's address:port/name)
    path: str
    match: str  # path type, then conditions and the split's weight, ","-joined
    action: str  # proxy, redirect:<code>:<url>, return:<code>, ...
    upstream: str  # the backend key (namespace/service:port)
    policies: str  # ","-joined Policy kinds; "500:invalid-policy" when one is invalid
    tls: str  # the certificate (namespace/secret), "unusable", "-"; "+redirect"
    endpoints: str  # the peers, address:port, space-separated


COLUMNS = tuple(f.name.upper() for f in fields(Row))


def _text(encoded: str) -> str:
    """A base64 user string, escaped when it holds a space or control character."""
    try:
        text = base64.b64decode(encoded, validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return encoded
    return _cell(text)


def _cell(text: str) -> str:
    if text == "":
        return '""'
    if any(c.isspace() or not c.isprintable() for c in text):
        # Escaped as Python writes it, spaces too: a cell is one awk field.
        return text.encode("unicode_escape").decode("ascii").replace(" ", "\\x20")
    return text


def _peers(value: str | None) -> str:
    """An E record's ``addr#port ...`` as ``addr:port ...`` (IPv6 bracketed)."""
    if not value:
        return "(none:503)"
    out = []
    for peer in value.split(" "):
        address, _, port = peer.rpartition("#")
        if not address:
            out.append(peer)
        else:
            out.append(f"[{address}]:{port}" if ":" in address else f"{address}:{port}")
    return " ".join(out)


def _condition(item: str) -> str:
    """``<b64 variable>.<b64 value>`` as ``header:x-a=v`` (NIC's condition kinds)."""
    variable, _, value = item.partition(".")
    name = _text(variable)
    for prefix, kind in (("http_", "header"), ("cookie_", "cookie"), ("arg_", "argument")):
        if name.startswith(prefix):
            name = name.removeprefix(prefix)
            # NGINX's $http_ names a header with "-" as "_"; cookies and arguments
            # keep their own names.
            name = f"{kind}:{name.replace('_', '-') if kind == 'header' else name}"
            break
    else:
        name = "method" if name == "request_method" else "$" + name
    return f"{name}={_text(value)}"


@dataclass(frozen=True)
class _Outcome:
    weight: str
    action: str
    upstream: int | None  # the U item's number; None: nothing proxied


def _action(text: str) -> _Outcome:
    """One ``<weight>:<action>`` of a V record (``virtualserver.py``'s ``action``)."""
    weight, _, action = text.partition(":")
    kind, *parts = action.split(".")
    if kind == "p" and parts:
        rewrite = _text(parts[1]) if len(parts) > 1 and parts[1] else ""
        described = f"proxy:rewrite={rewrite}" if rewrite else "proxy"
        return _Outcome(weight, described, int(parts[0]) if parts[0].isdigit() else None)
    if kind == "d" and len(parts) >= 2:
        return _Outcome(weight, f"redirect:{parts[0]}:{_text(parts[1])}", None)
    if kind == "t" and parts:
        return _Outcome(weight, f"return:{parts[0]}", None)
    return _Outcome(weight, _cell(action), None)


class _Host:
    """What is common to a host's rows."""

    def __init__(self, obj: str, host: str, tls: str, peers: Callable[[str], str]) -> None:
        self.obj, self.host, self.tls, self.peers = obj, host, tls, peers

    def row(self, path: str, match: str, action: str, upstream: str, policies: str) -> Row:
        endpoints = self.peers(upstream) if upstream != NONE else NONE
        # An empty cell would shift the columns after it.
        obj, host, path, match, action, upstream, policies, tls = (
            c or '""'
            for c in (self.obj, self.host, path, match, action, upstream, policies, self.tls)
        )
        return Row(obj, host, path, match, action, upstream, policies, tls, endpoints)


def _tls(cert: str, redirect: bool) -> str:
    """An H (or W) record's tls field: "-" none, "!" unusable, else the certificate
    id (``<namespace>/<secret>@<hash>``: the Secret is what a user knows)."""
    text = {"-": NONE, "!": "unusable"}.get(cert, cert.partition("@")[0])
    return f"{text}+redirect" if redirect else text


def host_rows(h: _Host, value: str) -> Iterator[Row]:
    """An H record's paths (``configs/routes.py``'s ``encode_host``)."""
    _tls_field, _redirect, default, _balancing, *routes = value.split(" ")
    for r in routes:
        kind, path, backend = r.split("|", 2)
        yield h.row(path, "Exact" if kind == "E" else "Prefix", "proxy", backend, NONE)
    if default != NONE:
        yield h.row("(default)", "any", "proxy", default, NONE)


def _policies(numbers: str, kinds: list[str]) -> str:
    if not numbers:
        return NONE
    if numbers == "!":
        return "500:invalid-policy"
    named = []
    for n in numbers.split(","):
        i = int(n) - 1 if n.isdigit() else -1
        named.append(kinds[i] if 0 <= i < len(kinds) else n)
    return ",".join(named)


def routing_rows(h: _Host, value: str) -> Iterator[Row]:
    """A V record's routes (``virtualserver.py``) or G items (``routes.py``)."""
    _redirect, *items = value.split(" ")
    upstreams: list[str] = []
    policies: list[str] = []
    for item in items:
        kind, _, rest = item.partition("|")
        if kind == "U":
            upstreams.append(rest.split("|", 1)[0])
        elif kind == "P":
            letter = rest.split("|", 1)[0]
            policies.append(_POLICIES.get(letter, letter))

    def up(o: _Outcome) -> str:
        ok = o.upstream is not None and 0 < o.upstream <= len(upstreams)
        return upstreams[o.upstream - 1] if ok and o.upstream else NONE

    for item in items:
        kind, _, rest = item.partition("|")
        if kind == "R":
            yield from _route(h, rest.split("|"), policies, up)
        elif kind == "G":
            yield from _gateway_match(h, rest.split("|"), up)
        elif kind == "S" and rest:
            named = _policies(rest, policies)
            # The host's own policies, then 404, for requests no route matches.
            yield h.row("(unmatched)", "any", "404", NONE, named)


def _splits(text: str) -> list[_Outcome]:
    return [_action(s) for s in text.split(",") if s]


def _route(
    h: _Host, f: list[str], kinds: list[str], up: Callable[[_Outcome], str]
) -> Iterator[Row]:
    modifier, path, _proxies, matches, default, _pages, enforced, *flags = f + [""] * (7 - len(f))
    base = _VS_PATHS.get(modifier, modifier)
    grpc = "g" in (flags[0] if flags else "")
    named = _policies(enforced, kinds)
    branches = [m.split(">", 1) for m in matches.split(";") if ">" in m]
    branches.append(["", default])
    for conditions, splits in branches:
        cond = [_condition(c) for c in conditions.split("&") if c]
        outcomes = _splits(splits)
        for o in outcomes:
            weight = [f"weight={o.weight}%"] if len(outcomes) > 1 else []
            action = o.action.replace("proxy", "proxy:grpc", 1) if grpc else o.action
            yield h.row(_text(path), ",".join([base, *cond, *weight]), action, up(o), named)


def _gateway_match(h: _Host, f: list[str], up: Callable[[_Outcome], str]) -> Iterator[Row]:
    path_kind, path, conditions, splits, filters = (f + [""] * 5)[:5]
    cond = []
    for c in conditions.split("&"):
        if c:
            text = _condition(c)
            # The value's first character is the mode: "=" equal, "~" a regex.
            name, _, value = text.partition("=")
            cond.append(f"{name}~{value[1:]}" if value.startswith("~") else f"{name}={value[1:]}")
    letters = [x.split(":", 1)[0] for x in filters.split(";") if x]
    # "h": the splits (1-based) whose backends speak h2c (backend_protocols.py).
    h2c = {n for x in filters.split(";") if x.startswith("h:") for n in x[2:].split("^")}
    outcomes = _splits(splits)
    # Gateway API's weights are relative: shown out of their sum.
    total = sum(int(o.weight) for o in outcomes if o.weight.isdigit())
    for i, o in enumerate(outcomes, 1):
        weight = [f"weight={o.weight}/{total}"] if len(outcomes) > 1 else []
        action = o.action.replace("proxy", "proxy:h2c", 1) if str(i) in h2c else o.action
        if "d" in letters:
            action = "redirect"
        extra = [_FILTERS.get(x, x) for x in letters if x not in ("d", "h")]
        if extra:
            action += "+" + "+".join(extra)
        match = ",".join([_GW_PATHS.get(path_kind, path_kind), *cond, *weight])
        yield h.row(_text(path), match, action, up(o), NONE)


def stream_rows(h: _Host, value: str) -> Iterator[Row]:
    """An S record (``stream.py``): the backend, and the backup if any."""
    backend, method, *rest = value.split(" ")
    yield h.row(NONE, "stream", f"proxy:{method}", backend, NONE)
    if len(rest) > 6:
        yield h.row(NONE, "stream", "proxy:backup", rest[6], NONE)


def rows(records: Mapping[RecordKey, str], holder: Callable[[RecordKey], str | None]) -> list[Row]:
    """Every route the records serve, by host; ``holder``: the resource a record
    is written for (Kind/namespace/name), None when not known."""
    endpoints = {name: v for (kind, name), v in records.items() if kind == Record.ENDPOINTS}
    hosts = {name: v for (kind, name), v in records.items() if kind == Record.HOST and v}
    ctx = _Context(records, hosts, lambda backend: _peers(endpoints.get(backend)))
    found: list[Row] = []
    for (kind, name), value in sorted(records.items()):
        if not value or kind not in _READ:
            continue
        obj = holder((kind, name)) or NONE
        try:
            found += _READ[kind](obj, name, value, ctx)
        except (ValueError, IndexError):
            # The table only shows what is served: a record it cannot read
            # (a grammar newer than this reader) is said, never fatal to render.
            found.append(Row(obj, name, NONE, NONE, "(not-decoded)", NONE, NONE, NONE, NONE))
    return found


@dataclass(frozen=True)
class _Context:
    records: Mapping[RecordKey, str]
    hosts: Mapping[str, str]  # the H records, by host
    peers: Callable[[str], str]  # a backend key's endpoints, as a cell


def _host(obj: str, name: str, value: str, ctx: _Context) -> Iterator[Row]:
    tls, redirect, _ = value.split(" ", 2)
    return host_rows(_Host(obj, name, _tls(tls, redirect.startswith("1")), ctx.peers), value)


def _routing(obj: str, name: str, value: str, ctx: _Context) -> Iterator[Row]:
    # The host's H stub carries its TLS; the V record its redirect.
    cert = ctx.hosts.get(name, "- 0").split(" ", 1)[0]
    redirect = not value.startswith("-")
    return routing_rows(_Host(obj, name, _tls(cert, redirect), ctx.peers), value)


def _gateway(obj: str, name: str, value: str, ctx: _Context) -> Iterator[Row]:
    cert, _listener, routing = [*value.split(" ", 2), "", ""][:3]
    return routing_rows(_Host(obj, name, _tls(cert, False), ctx.peers), routing)


def _stream(obj: str, name: str, value: str, ctx: _Context) -> Iterator[Row]:
    # A T record of the same key: the TransportServer ends TLS.
    tls = "terminated" if ctx.records.get((Record.STREAM_CERTIFICATE, name)) else NONE
    return stream_rows(_Host(obj, f"listener:{name}", tls, ctx.peers), value)


# The record kinds that hold routes, and their readers; the others are read
# through these (E, C, T), and F repeats V's routes for the C module.
_READ: dict[str, Callable[[str, str, str, _Context], Iterator[Row]]] = {
    Record.HOST: _host,
    Record.ROUTING: _routing,
    Record.GATEWAY: _gateway,
    Record.STREAM: _stream,
}


def table(found: list[Row]) -> str:
    """The rows under a header, columns aligned (ENDPOINTS, the last, is not
    padded); "" when there is none."""
    if not found:
        return ""
    cells = [list(COLUMNS), *([getattr(r, f.name) for f in fields(Row)] for r in found)]
    widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS) - 1)]
    lines = []
    for c in cells:
        padded = [v.ljust(w) for v, w in zip(c, widths, strict=False)]
        lines.append("  ".join([*padded, c[-1]]).rstrip())
    return "\n".join(lines) + "\n"
