"""What a VirtualServer route does: actions, splits, matches and error pages, with NIC's rules."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from ferryman.resources import nic_rules as rules
from ferryman.resources.nic_fields import Obj, Problem, invalid, not_found, required

ACTION_KEYS = frozenset({"pass", "redirect", "return", "proxy"})
_REDIRECT_KEYS = frozenset({"url", "code"})
_RETURN_KEYS = frozenset({"code", "type", "body", "headers"})
_HEADER_KEYS = frozenset({"name", "value"})
_PROXY_KEYS = frozenset({"upstream", "rewritePath", "requestHeaders", "responseHeaders"})
ERROR_PAGE_KEYS = frozenset({"codes", "return", "redirect"})

# NGINX variables NIC allows in each place (NIC's lists, unchanged).
_COMMON_VARIABLES = frozenset(
    [
        "request_uri",
        "request_method",
        "request_body",
        "scheme",
        "args",
        "host",
        "request_time",
        "request_length",
        "nginx_version",
        "pid",
        "connection",
        "remote_addr",
        "remote_port",
        "time_iso8601",
        "time_local",
        "server_addr",
        "server_port",
        "server_name",
        "server_protocol",
        "connections_active",
        "connections_reading",
        "connections_writing",
        "connections_waiting",
    ]
)
RETURN_BODY_VARIABLES = _COMMON_VARIABLES
PROXY_HEADER_VARIABLES = _COMMON_VARIABLES | frozenset(
    [
        "ssl_cipher",
        "ssl_ciphers",
        "ssl_client_cert",
        "ssl_client_escaped_cert",
        "ssl_client_fingerprint",
        "ssl_client_i_dn",
        "ssl_client_i_dn_legacy",
        "ssl_client_raw_cert",
        "ssl_client_s_dn",
        "ssl_client_s_dn_legacy",
        "ssl_client_serial",
        "ssl_client_v_end",
        "ssl_client_v_remain",
        "ssl_client_v_start",
        "ssl_client_verify",
        "ssl_curves",
        "ssl_early_data",
        "ssl_protocol",
        "ssl_server_name",
        "ssl_session_id",
        "ssl_session_reused",
    ]
)
REDIRECT_VARIABLES = frozenset({"scheme", "http_x_forwarded_proto", "request_uri", "host"})
ERROR_PAGE_REDIRECT_VARIABLES = frozenset({"scheme", "http_x_forwarded_proto"})
ERROR_PAGE_VARIABLES = frozenset({"upstream_status"})
IGNORE_HEADERS = frozenset(
    [
        "X-Accel-Redirect",
        "X-Accel-Expires",
        "X-Accel-Limit-Rate",
        "X-Accel-Buffering",
        "X-Accel-Charset",
        "Expires",
        "Cache-Control",
        "Set-Cookie",
        "Vary",
    ]
)
_RETURN_SPECIAL = ("arg_", "http_", "cookie_")
_PROXY_SPECIAL = ("arg_", "http_", "cookie_", "jwt_claim_", "jwt_header_")


@dataclass(frozen=True)
class Header:
    name: str
    value: str


HeaderRule = Callable[[Obj], Header]


@dataclass(frozen=True)
class AddHeader:
    name: str
    value: str
    always: bool = False


@dataclass(frozen=True)
class Pass:
    upstream: str


@dataclass(frozen=True)
class Redirect:
    url: str  # may hold ${scheme}, ${host}, ${request_uri}, ${http_x_forwarded_proto}
    code: int = 301


@dataclass(frozen=True)
class Return:
    body: str
    code: int = 200  # 0 in an error page: the original response's status
    type: str = "text/plain"
    headers: tuple[Header, ...] = ()


@dataclass(frozen=True)
class Proxy:
    upstream: str
    rewrite_path: str = ""
    pass_request_headers: bool = True
    set_request_headers: tuple[Header, ...] = ()
    hide_response_headers: tuple[str, ...] = ()
    pass_response_headers: tuple[str, ...] = ()
    ignore_response_headers: tuple[str, ...] = ()
    add_response_headers: tuple[AddHeader, ...] = ()


Action = Pass | Redirect | Return | Proxy


@dataclass(frozen=True)
class ErrorPage:
    codes: tuple[int, ...]
    response: Redirect | Return


@dataclass(frozen=True)
class Scope:
    """What an action may refer to: the upstream names, and the route's path."""

    upstreams: frozenset[str]
    path: str


def parse_action(a: Obj, scope: Scope, internal: bool) -> Action | None:
    ctx = a.ctx
    # As NIC counts: a non-empty pass, any redirect, return or proxy object.
    if sum(a.has(k) for k in ACTION_KEYS) - (a.raw.get("pass") == "") != 1:
        ctx.add(
            required(
                a.path, "action must specify exactly one of `pass`, `redirect`, `return` or `proxy`"
            )
        )
        return None
    before = len(ctx.problems)
    action: Action | None = None
    if a.raw.get("pass"):
        name = a.text("pass")
        ctx.extend(_upstream_ref(a.at("pass"), name, scope))
        action = Pass(name)
    elif (r := a.obj("redirect", _REDIRECT_KEYS)) is not None:
        action = parse_redirect(r, REDIRECT_VARIABLES)
    elif (r := a.obj("return", _RETURN_KEYS)) is not None:
        action = parse_return(r, _RETURN_SPECIAL, RETURN_BODY_VARIABLES, _header)
    elif (p := a.obj("proxy", _PROXY_KEYS)) is not None:
        action = _proxy(p, scope, internal)
    return action if len(ctx.problems) == before else None


def _upstream_ref(where: str, name: str, scope: Scope) -> list[Problem]:
    if not name:
        return [required(where)]
    if bad := rules.dns1035_label(name):
        return [invalid(where, name, m) for m in bad]
    return [] if name in scope.upstreams else [not_found(where, name)]


def parse_redirect(r: Obj, allowed: frozenset[str]) -> Redirect:
    url = r.text("url")
    where = r.at("url")
    if not url:
        r.ctx.add(required(where, "must specify a url"))
    elif "://" not in url:
        r.ctx.add(
            invalid(
                where,
                url,
                "must contain the protocol with '://', for example http://, https:// or ${scheme}://",
            )
        )
    elif bad := rules.escaped_string(
        url, "http://www.nginx.com", "${scheme}://${host}/green/", '\\"http://www.nginx.com\\"'
    ):
        r.ctx.add(invalid(where, url, bad))
    else:
        r.ctx.extend([invalid(where, v, m) for v, m in rules.variables(url, (), allowed)])
        r.ctx.extend([invalid(where, url, m) for m in rules.token_with_variables(url, "URL")])
    code = r.integer("code") or 0
    if code and code not in rules.REDIRECT_CODES:
        r.ctx.add(invalid(r.at("code"), code, rules.REDIRECT_CODE_ERROR))
    return Redirect(url, code or 301)


_RETURN_TYPE_FMT = r'([^;\{\}"\\]|\\.)*'


def parse_return(
    r: Obj, special: tuple[str, ...], allowed: frozenset[str], header_rule: HeaderRule
) -> Return:
    ctx = r.ctx
    body = r.text("body")
    if not body:
        ctx.add(required(r.at("body")))
    else:
        examples = ("Hello World! \\n", '\\"${request_uri}\\" is unavailable. \\n')
        ctx.extend([invalid(r.at("body"), body, m) for m in rules.quoted_text(body, *examples)])
        ctx.extend(
            [invalid(r.at("body"), v, m) for v, m in rules.variables(body, special, allowed)]
        )
    kind = r.text("type")
    if kind and not re.fullmatch(_RETURN_TYPE_FMT, kind, re.DOTALL):
        message = rules.regex_error(
            "must have all '\"' (double quotes), '{', '}' or ';' escaped and must not end with "
            "an unescaped '\\' (backslash)",
            _RETURN_TYPE_FMT,
            "type/subtype",
            "application/json",
        )
        ctx.add(invalid(r.at("type"), kind, message))
    elif kind:  # "text/html; charset=utf-8" has a space; NIC's rule above refuses the rest
        ctx.extend(
            [invalid(r.at("type"), kind, m) for m in rules.token(kind.replace(" ", ""), "type")]
        )
    code = r.integer("code") or 0
    if code and not (200 <= code <= 299 or 400 <= code <= 599):
        ctx.add(
            invalid(
                r.at("code"),
                code,
                "must be a valid status code either 2XX, 4XX or 5XX, for example, 200 or 402.",
            )
        )
    headers = tuple(header_rule(h) for h in r.objs("headers", _HEADER_KEYS))
    return Return(body, code or 200, kind or "text/plain", headers)


def _header_name(h: Obj) -> str:
    name = h.text("name")
    if not name:
        h.ctx.add(required(h.at("name")))
    h.ctx.extend([invalid(h.at("name"), name, m) for m in rules.http_header_name(name)])
    return name


def _header(h: Obj) -> Header:
    """A header with a plain value (NIC's validateHeader)."""
    name = _header_name(h)
    value = h.text("value")
    h.ctx.extend([invalid(h.at("value"), value, m) for m in rules.header_value(value)])
    return Header(name, value)


def error_page_header(h: Obj) -> Header:
    name = _header_name(h)
    value = h.text("value")
    where = h.at("value")
    if bad := rules.escaped_string(value, "value", '\\"${status}\\"'):
        h.ctx.add(invalid(where, value, bad))
    h.ctx.extend([invalid(where, value, m) for m in rules.single_line(value)])
    h.ctx.extend(
        [invalid(where, v, m) for v, m in rules.variables(value, (), ERROR_PAGE_VARIABLES)]
    )
    return Header(name, value)


def _proxy_header(h: Obj) -> Header:
    name = _header_name(h)
    value = h.text("value")
    where = h.at("value")
    examples = ("Hello World! \\n", '\\"${request_uri}\\" is unavailable. \\n')
    if bad := rules.escaped_string(value, *examples):
        h.ctx.add(invalid(where, value, bad))
    h.ctx.extend([invalid(where, value, m) for m in rules.single_line(value)])
    h.ctx.extend(
        [
            invalid(where, v, m)
            for v, m in rules.variables(value, _PROXY_SPECIAL, PROXY_HEADER_VARIABLES)
        ]
    )
    return Header(name, value)


def _proxy(p: Obj, scope: Scope, internal: bool) -> Proxy:
    ctx = p.ctx
    upstream = p.text("upstream")
    ctx.extend(_upstream_ref(p.at("upstream"), upstream, scope))
    rewrite = p.text("rewritePath")
    if rewrite:
        ctx.extend(
            _rewrite_path(p.at("rewritePath"), rewrite, scope.path.startswith("~") or internal)
        )
    pass_headers = True
    set_headers: tuple[Header, ...] = ()
    if (req := p.obj("requestHeaders", frozenset({"pass", "set"}))) is not None:
        pass_headers = req.boolean("pass") is not False
        set_headers = tuple(_proxy_header(h) for h in req.objs("set", _HEADER_KEYS))
    hide: tuple[str, ...] = ()
    passed: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    add: tuple[AddHeader, ...] = ()
    res = p.obj("responseHeaders", frozenset({"hide", "pass", "ignore", "add"}))
    if res is not None:
        hide, passed = _header_names(res, "hide"), _header_names(res, "pass")
        for where, name in res.str_items("ignore") or ():
            if name not in IGNORE_HEADERS:
                shown = ", ".join(sorted(IGNORE_HEADERS))
                ctx.add(
                    invalid(
                        where,
                        name,
                        f"not a valid ignore header name. Accepted headers are : {shown}",
                    )
                )
        ignore = res.strs("ignore") or ()
        add = tuple(
            AddHeader(h.name, h.value, a.boolean("always") is True)
            for a in res.objs("add", _HEADER_KEYS | {"always"})
            if (h := _proxy_header(a))
        )
    return Proxy(upstream, rewrite, pass_headers, set_headers, hide, passed, ignore, add)


def _header_names(o: Obj, key: str) -> tuple[str, ...]:
    names = []
    for where, name in o.str_items(key) or ():
        o.ctx.extend([invalid(where, name, m) for m in rules.http_header_name(name)])
        names.append(name)
    return tuple(names)


def _rewrite_path(where: str, value: str, regex: bool) -> list[Problem]:
    out = []
    for i, c in enumerate(value[:-1]):
        if c == "$" and value[i + 1] not in "0123456789":  # Go's Atoi: ASCII digits
            out.append(invalid(where, value, "`$` character can be only followed by a number"))
            break
    if regex:
        if bad := rules.escaped_string(value, "/rewrite$1", "/images"):
            out.append(invalid(where, value, bad))
        out += [invalid(where, value, m) for m in rules.token(value, "rewritePath")]
    else:
        out += [invalid(where, value, m) for m in rules.path(value)]
    return out


def parse_error_page(e: Obj) -> ErrorPage | None:
    ctx = e.ctx
    if e.has("return") == e.has("redirect"):
        ctx.add(required(e.path, "must specify exactly one of `redirect` or `return`"))
        return None
    codes = e.int_items("codes") or []
    if not codes:
        ctx.add(required(e.at("codes"), "must include at least 1 status code in `codes`"))
        return None
    before = len(ctx.problems)
    for where, code in codes:
        if not 300 <= code <= 599:
            ctx.add(invalid(where, code, rules.range_error(300, 599)))
    response: Redirect | Return
    if (r := e.obj("return", _RETURN_KEYS)) is not None:
        response = parse_return(r, (), ERROR_PAGE_VARIABLES, error_page_header)
        if r.integer("code") is None:
            # NIC: an error page's return keeps the original status by default.
            response = replace(response, code=0)
    elif (r := e.obj("redirect", _REDIRECT_KEYS)) is not None:
        response = parse_redirect(r, ERROR_PAGE_REDIRECT_VARIABLES)
    else:
        return None
    if len(ctx.problems) != before:
        return None
    return ErrorPage(tuple(c for _, c in codes), response)
