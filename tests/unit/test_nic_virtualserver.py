"""VirtualServer and VirtualServerRoute: each of NIC's rules, with NIC's message, and ferryman's
narrowing of every value that could reach NGINX."""

from __future__ import annotations

from typing import Any

import pytest

from ferryman.kinds.virtualserver.parse.action import Proxy, Redirect, Return
from ferryman.kinds.virtualserver.parse.route import RouteRef
from ferryman.kinds.virtualserver.parse.virtualserver import parse_virtual_server
from ferryman.kinds.virtualserver.parse.virtualserverroute import (
    check_for_virtual_server,
    parse_virtual_server_route,
)
from ferryman.resources.nic_upstream import LoadBalancing
from testkit.nic_edit import DELETE, edited
from testkit.nic_fixtures import VIRTUAL_SERVER, VIRTUAL_SERVER_ROUTE

SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
WILDCARD = (
    "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which "
    "must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric "
    "character (e.g. '*.example.com', regex used for validation is "
    "'\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
DNS1035 = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
HEADER = (
    "a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', "
    "regex used for validation is '[-A-Za-z0-9]+')"
)
ESCAPED_BODY = (
    "must have all '\"' (double quotes) escaped and must not end with an unescaped '\\' "
    "(backslash) (e.g. 'Hello World! \\n',  or '\\\"${request_uri}\\\" is unavailable. \\n', "
    "regex used for validation is '([^\"\\\\]|\\\\.)*')"
)
NIC_PATH = (
    "must start with / and must not include any whitespace character, `{`, `}` or `;` (e.g. "
    "'/',  or '/path',  or '/path/subpath-123', regex used for validation is '/[^\\s{};\\\\]*')"
)
EXACTLY_ONE = "must specify exactly one of `action`, `splits`, `route` or `routeSelector`"
U0, R0, R1, R2 = "spec.upstreams[0]", "spec.routes[0]", "spec.routes[1]", "spec.routes[2]"
PROXY = f"{R0}.action.proxy"


def problems(*changes: tuple[str, Any]) -> list[str]:
    parsed = parse_virtual_server(edited(VIRTUAL_SERVER, *changes))
    assert (parsed.resource is None) == bool(parsed.problems)
    return [str(p) for p in parsed.problems]


def test_the_rich_fixture_is_valid_and_modelled() -> None:
    vs = parse_virtual_server(VIRTUAL_SERVER).resource
    assert vs is not None
    assert vs.tls is not None and vs.tls.redirect is not None
    assert (vs.tls.redirect.code, vs.tls.redirect.based_on) == (308, "x-forwarded-proto")
    tea, coffee = vs.upstreams
    assert tea.lb_method == LoadBalancing("hash", "$request_uri", consistent=True)
    assert (tea.read_timeout_ms, tea.send_timeout_ms, tea.client_max_body_size) == (
        90_000,
        500,
        2 * 1024**3,
    )
    assert tea.next_upstream == ("error", "timeout", "http_502") and tea.tls
    assert (coffee.service, coffee.service_namespace, coffee.type) == (
        "coffee-svc",
        "other-ns",
        "grpc",
    )
    assert isinstance(vs.routes[0].action, Proxy) and not vs.routes[0].action.pass_request_headers
    assert [str(r.path) for r in vs.routes] == [
        "/tea",
        "~*^/coffee/(.*)$",
        "=/health",
        "/juice",
        "/bar",
    ]
    assert (
        isinstance(vs.routes[2].action, Return)
        and vs.routes[2].action.body == "OK ${request_uri}\n"
    )
    assert isinstance(vs.routes[1].splits[1].action, Redirect)
    assert vs.routes[1].splits[1].action.code == 301  # NIC's default
    assert [c.kind for c in vs.routes[1].matches[0].conditions] == [
        "header",
        "cookie",
        "argument",
        "variable",
    ]
    assert vs.routes[3].route == RouteRef("juice", "juice-routes")
    assert vs.routes[4].route_selector == (("app", "bar"),)
    assert vs.delegating_paths("juice", "juice-routes") == ("/juice",)
    assert vs.policies[0].namespace == "shared" and vs.routes[0].policies[0].namespace == "default"


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        # host
        ((("spec.host", ""),), "spec.host: Required value"),
        (
            (("spec.host", "Cafe.example.com"),),
            f'spec.host: Invalid value: "Cafe.example.com": {SUBDOMAIN}',
        ),
        (
            (("spec.host", "*.Example.com"),),
            f'spec.host: Invalid value: "*.Example.com": {WILDCARD}',
        ),
        ((("spec.host", "cafe.*.com"),), f'spec.host: Invalid value: "cafe.*.com": {SUBDOMAIN}'),
        # tls
        (
            (("spec.tls.redirect.code", 303),),
            "spec.tls.redirect.code: Invalid value: 303: status code out of accepted range. "
            "accepted values are '301', '302', '307', '308'",
        ),
        (
            (("spec.tls.redirect.basedOn", "host"),),
            "spec.tls.redirect.basedOn: Invalid value: \"host\": accepted values are 'scheme', "
            "'x-forwarded-proto'",
        ),
        (
            (("spec.tls.secret", "Secret"),),
            f'spec.tls.secret: Invalid value: "Secret": {SUBDOMAIN}',
        ),
        # upstreams
        ((("spec.upstreams[1].name", "tea"),), 'spec.upstreams[1].name: Duplicate value: "tea"'),
        (((f"{U0}.name", "Tea"),), f'{U0}.name: Invalid value: "Tea": {DNS1035}'),
        (((f"{U0}.service", ""),), f"{U0}.service: Required value"),
        (
            ((f"{U0}.service", "a/b/c"),),
            f'{U0}.service: Invalid value: "a/b/c":  service reference must be in the format '
            "namespace/service-name",
        ),
        (
            ((f"{U0}.service", "Ns/svc"),),
            f'{U0}.service: Invalid value: "Ns/svc": invalid namespace in service reference',
        ),
        (
            ((f"{U0}.port", 0),),
            f"{U0}.port: Invalid value: 0: must be between 1 and 65535, inclusive",
        ),
        (
            ((f"{U0}.port", DELETE),),
            f"{U0}.port: Invalid value: 0: must be between 1 and 65535, inclusive",
        ),
        (((f"{U0}.port", "80"),), f'{U0}.port: Invalid value: "80": must be of type integer'),
        (
            ((f"{U0}.lb-method", "fastest"),),
            f'{U0}.lb-method: Invalid value: "fastest": invalid load balancing method: "fastest"',
        ),
        (
            ((f"{U0}.lb-method", "hash $a;b"),),
            f'{U0}.lb-method: Invalid value: "hash $a;b": a hash key must not contain whitespace, '
            "control characters, quotes, '\\', '`', ';', '{' or '}' (ferryman): found ';'",
        ),
        (
            ((f"{U0}.connect-timeout", "10x"),),
            f'{U0}.connect-timeout: Invalid value: "10x": invalid time string',
        ),
        (
            ((f"{U0}.fail-timeout", " "),),
            f'{U0}.fail-timeout: Invalid value: " ": invalid time string',
        ),
        (
            ((f"{U0}.max-fails", -1),),
            f"{U0}.max-fails: Invalid value: -1: must be positive or zero",
        ),
        (
            ((f"{U0}.keepalive", -1),),
            f"{U0}.keepalive: Invalid value: -1: must be positive or zero",
        ),
        (
            ((f"{U0}.next-upstream-tries", -2),),
            f"{U0}.next-upstream-tries: Invalid value: -2: must be positive or zero",
        ),
        (
            ((f"{U0}.buffers.number", 0),),
            f"{U0}.buffers.number: Invalid value: 0: must be positive",
        ),
        (((f"{U0}.buffers.size", DELETE),), f"{U0}.buffers.size: Required value: cannot be empty"),
        (
            ((f"{U0}.buffer-size", "1G"),),
            f'{U0}.buffer-size: Invalid value: "1G": must consist of numeric characters followed '
            "by a valid size suffix. 'k|K|m|M (e.g. '16',  or '32k',  or '64M', regex used for "
            "validation is '\\d+[kKmM]?')",
        ),
        (
            ((f"{U0}.client-max-body-size", "1T"),),
            f'{U0}.client-max-body-size: Invalid value: "1T": must consist of numeric characters '
            "followed by a valid size suffix. 'k|K|m|M|g|G (e.g. '16',  or '32k',  or '64M',  or "
            "'2G', regex used for validation is '\\d+[kKmMgG]?')",
        ),
        (
            ((f"{U0}.type", "tcp"),),
            f'{U0}.type: Invalid value: "tcp": must be one of `grpc` or `http`',
        ),
        (
            ((f"{U0}.healthCheck", {"enable": True}),),
            f"{U0}.healthCheck: Forbidden: active health checks are only supported in NGINX Plus",
        ),
        (
            ((f"{U0}.slow-start", "10s"),),
            f"{U0}.slow-start: Forbidden: slow start is only supported in NGINX Plus",
        ),
        (((f"{U0}.ntlm", True),), f"{U0}.ntlm: Forbidden: NTLM is only supported in NGINX Plus"),
        # paths
        (
            ((f"{R0}.path", "tea"),),
            f'{R0}.path: Invalid value: "tea": must start with /, ~, = or ^~',
        ),
        (((f"{R0}.path", "/te a"),), f'{R0}.path: Invalid value: "/te a": {NIC_PATH}'),
        (((f"{R0}.path", "/a;b"),), f'{R0}.path: Invalid value: "/a;b": {NIC_PATH}'),
        (
            ((f"{R0}.path", "//tea"),),
            f'{R0}.path: Invalid value: "//tea": protocol-relative URIs not allowed, must '
            "not start with '//'",
        ),
        (
            ((f"{R0}.path", "/a/../b"),),
            f'{R0}.path: Invalid value: "/a/../b": path traversal not allowed, path must not '
            "contain '..' segments",
        ),
        (
            ((f"{R0}.path", '/tea"'),),
            f'{R0}.path: Invalid value: "/tea\\"": a path must not contain whitespace, control '
            "characters, quotes, '\\', '`', ';', '{' or '}' (ferryman): found '\"'",
        ),
        (((f"{R0}.path", "="),), f"{R0}.path: Required value"),
        (
            ((f"{R1}.path", "~ ^/coffee/("),),
            f'{R1}.path: Invalid value: "~ ^/coffee/(": must be a valid regular expression: '
            "missing closing parenthesis at offset 10",
        ),
        (
            ((f"{R1}.path", "~ ^/v{2}"),),
            f'{R1}.path: Invalid value: "~ ^/v{{2}}": a regular expression must not contain '
            "whitespace, control characters, quotes, '\\', '`', ';', '{' or '}' (ferryman): found "
            "'{', '}'",
        ),
        (((f"{R2}.path", "/tea"),), f'{R2}.path: Duplicate value: "/tea"'),
        (((f"{R2}.path", "~*^/coffee/(.*)$"),), f'{R2}.path: Duplicate value: "~*^/coffee/(.*)$"'),
        # one location to NGINX ("location /tea" and "location ^~ /tea")
        (((f"{R2}.path", "^~ /tea"),), f'{R2}.path: Duplicate value: "^~ /tea"'),
        # what a route does
        (((f"{R0}.route", "juice"),), f'{R0}: Invalid value: "": {EXACTLY_ONE}'),
        (((f"{R0}.action", DELETE),), f'{R0}: Invalid value: "": {EXACTLY_ONE}'),
        (
            ((f"{R0}.action.pass", "tea"),),
            f"{R0}.action: Required value: action must specify exactly one of `pass`, `redirect`, "
            "`return` or `proxy`",
        ),
        (((f"{R0}.action", {"pass": "milk"}),), f'{R0}.action.pass: Not found: "milk"'),
        (
            ((f"{R0}.action", {"pass": ""}),),
            f"{R0}.action: Required value: action must specify exactly one of",
        ),
        (
            ((f"{R0}.action", {"redirect": {"url": "example.com"}}),),
            f'{R0}.action.redirect.url: Invalid value: "example.com": must contain the protocol '
            "with '://', for example http://, https:// or ${scheme}://",
        ),
        (
            ((f"{R0}.action", {"redirect": {"url": "${bogus}://x"}}),),
            f"{R0}.action.redirect.url: Invalid value: \"bogus\": 'bogus' contains an invalid "
            "NGINX "
            "variable. Accepted variables are: host, http_x_forwarded_proto, request_uri, scheme",
        ),
        (
            ((f"{R0}.action", {"redirect": {"url": "http://x/$host"}}),),
            f'{R0}.action.redirect.url: Invalid value: "http://x/$host": variables must be '
            "enclosed in curly braces, for example ${host}",
        ),
        (
            ((f"{R0}.action", {"redirect": {"url": "http://x/a b"}}),),
            f'{R0}.action.redirect.url: Invalid value: "http://x/a b": a URL must not contain '
            "whitespace, control characters, quotes, '\\', '`', ';', '{' or '}' (ferryman): "
            "found ' '",
        ),
        (
            ((f"{R0}.action", {"redirect": {"url": "http://x", "code": 200}}),),
            f"{R0}.action.redirect.code: Invalid value: 200: status code out of accepted range. "
            "accepted values are '301', '302', '307', '308'",
        ),
        (
            ((f"{R2}.action.return.code", 302),),
            f"{R2}.action.return.code: Invalid value: 302: must be a valid status code either "
            "2XX, 4XX or 5XX, for example, 200 or 402.",
        ),
        (((f"{R2}.action.return.body", ""),), f"{R2}.action.return.body: Required value"),
        (
            ((f"{R2}.action.return.body", 'say "hi"'),),
            f'{R2}.action.return.body: Invalid value: "say \\"hi\\"": {ESCAPED_BODY}',
        ),
        (
            ((f"{R2}.action.return.body", "a\x00b"),),
            f'{R2}.action.return.body: Invalid value: "a\\u0000b": must not contain control '
            "characters other than tab and newline (ferryman)",
        ),
        (
            ((f"{R2}.action.return.body", "${cookie_a-b}"),),
            f'{R2}.action.return.body: Invalid value: "cookie_a-b": a valid cookie name must '
            "consist of alphanumeric characters or '_' (e.g. 'my_cookie_123', regex used for "
            "validation is '[_A-Za-z0-9]+')",
        ),
        (
            ((f"{R2}.action.return.type", "text/html; charset=utf-8"),),
            f'{R2}.action.return.type: Invalid value: "text/html; charset=utf-8": must have all '
            "'\"' (double quotes), '{', '}' or ';' escaped and must not end with an unescaped '\\' "
            "(backslash) (e.g. 'type/subtype',  or 'application/json', regex used for validation "
            "is '([^;\\{\\}\"\\\\]|\\\\.)*')",
        ),
        (
            ((f"{R2}.action.return.headers[0].name", "X Bad"),),
            f'{R2}.action.return.headers[0].name: Invalid value: "X Bad": {HEADER}',
        ),
        (
            ((f"{R2}.action.return.headers[0].value", "a\nb"),),
            f'{R2}.action.return.headers[0].value: Invalid value: "a\\nb": must not contain '
            "control characters or line breaks (ferryman)",
        ),
        (
            ((f"{PROXY}.requestHeaders.set[0].value", "${upstream_addr}"),),
            f'{PROXY}.requestHeaders.set[0].value: Invalid value: "upstream_addr": '
            "'upstream_addr' contains an invalid NGINX variable. Accepted variables are: args, ",
        ),
        (
            ((f"{PROXY}.requestHeaders.set[0].value", "a\r\nX-Injected: 1"),),
            f'{PROXY}.requestHeaders.set[0].value: Invalid value: "a\\r\\nX-Injected: 1": must '
            "not contain control characters or line breaks (ferryman)",
        ),
        (
            ((f"{PROXY}.responseHeaders.ignore[0]", "X-Foo"),),
            f'{PROXY}.responseHeaders.ignore[0]: Invalid value: "X-Foo": not a valid ignore '
            "header name. Accepted headers are : Cache-Control, Expires, Set-Cookie, Vary, ",
        ),
        (
            ((f"{PROXY}.rewritePath", "/a$b"),),
            f'{PROXY}.rewritePath: Invalid value: "/a$b": `$` character can be only followed '
            "by a number",
        ),
        (((f"{PROXY}.upstream", ""),), f"{PROXY}.upstream: Required value"),
        # splits and matches
        (
            ((f"{R1}.splits", [{"weight": 100, "action": {"pass": "tea"}}]),),
            f'{R1}.splits: Invalid value: "": must include at least 2 splits',
        ),
        (
            ((f"{R1}.splits[0].weight", 91),),
            f'{R1}.splits: Invalid value: "": the sum of the weights of all splits must be '
            "equal to 100",
        ),
        (
            ((f"{R1}.splits[1].weight", -10), (f"{R1}.splits[0].weight", 110)),
            f"{R1}.splits[0].weight: Invalid value: 110: must be between 0 and 100, inclusive",
        ),
        (((f"{R1}.splits[0].action", DELETE),), f"{R1}.splits[0].action: Required value"),
        (
            ((f"{R1}.matches[0].conditions[0].cookie", "c"),),
            f'{R1}.matches[0].conditions[0]: Invalid value: "": must specify exactly one of: '
            "`header`, `cookie`, `argument` or `variable`",
        ),
        (
            ((f"{R1}.matches[0].conditions[3].variable", "request_method"),),
            f'{R1}.matches[0].conditions[3].variable: Invalid value: "request_method": must '
            "start with `$`",
        ),
        (
            ((f"{R1}.matches[0].conditions[3].variable", "$host"),),
            f'{R1}.matches[0].conditions[3].variable: Invalid value: "$host": is not allowed or is '
            "not an NGINX variable",
        ),
        (
            ((f"{R1}.matches[0].conditions[3].value", 'a"b'),),
            f'{R1}.matches[0].conditions[3].value: Invalid value: "a\\"b": must have all \'"\' '
            "(double quotes) escaped and must not end with an unescaped '\\' (backslash) (e.g. "
            "'value-123', regex used for validation is '([^\"\\\\]|\\\\.)*')",
        ),
        (
            ((f"{R1}.matches[0].conditions", []),),
            f"{R1}.matches[0].conditions: Required value: must specify at least one condition",
        ),
        (
            ((f"{R1}.matches[0].splits", [{"weight": 50, "action": {"pass": "tea"}}] * 2),),
            f'{R1}.matches[0]: Invalid value: "": must specify exactly one of `action` or `splits`',
        ),
        # error pages
        (
            ((f"{R0}.errorPages[0].codes[0]", 200),),
            f"{R0}.errorPages[0].codes[0]: Invalid value: 200: must be between 300 and 599, "
            "inclusive",
        ),
        (
            ((f"{R0}.errorPages[0].codes", []),),
            f"{R0}.errorPages[0].codes: Required value: must include at least 1 status code "
            "in `codes`",
        ),
        (
            ((f"{R0}.errorPages[0].redirect", {"url": "http://x"}),),
            f"{R0}.errorPages[0]: Required value: must specify exactly one of `redirect` or "
            "`return`",
        ),
        (
            ((f"{R0}.errorPages[1].redirect.url", "${scheme}://${host}/"),),
            f"{R0}.errorPages[1].redirect.url: Invalid value: \"host\": 'host' contains an invalid "
            "NGINX variable. Accepted variables are: http_x_forwarded_proto, scheme",
        ),
        # delegation, policies, and what ferryman does not offer
        (
            (("spec.routes[3].route", "a/b/c"),),
            'spec.routes[3].route: Invalid value: "a/b/c": a valid label key must consist of '
            "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
            "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
            "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and "
            "'/' (e.g. 'example.com/MyName')",
        ),
        (
            (("spec.routes[4].routeSelector.matchLabels", {}),),
            "spec.routes[4].routeSelector.matchLabels: Required value: must specify at least "
            "one label",
        ),
        (
            (("spec.policies", [{"name": "rate-limit", "namespace": "shared"}] * 2),),
            'spec.policies[1]: Duplicate value: "shared/rate-limit"',
        ),
        (((f"{R0}.policies[0].name", ""),), f"{R0}.policies[0].name: Required value"),
        ((("spec.hots", "x"),), "spec.hots: Unknown field"),
        (
            (("spec.server-snippets", "add_header X 1;"),),
            "spec.server-snippets: Forbidden: not supported by ferryman: snippets are raw NGINX "
            "configuration, which ferryman never accepts from a resource",
        ),
        (
            (("spec.routes[4]", {"path": "~/juice", "route": "juice/juice-routes"}),),
            'spec.routes[4].path: Invalid value: "~/juice": routes referencing the same '
            "VirtualServerRoute 'juice/juice-routes' must use the same modifier type, but got "
            "'prefix' and 'regex'",
        ),
    ],
)
def test_each_rule_with_nics_message(changes: tuple[tuple[str, Any], ...], expected: str) -> None:
    found = problems(*changes)
    assert any(p.startswith(expected) for p in found), found


@pytest.mark.parametrize(
    "method",
    [
        "round_robin",
        "least_conn",
        "ip_hash",
        "random",
        "random two",
        "random two least_conn",
        "hash $remote_addr",
    ],
)
def test_every_lb_method_nic_accepts_is_accepted(method: str) -> None:
    assert problems((f"{U0}.lb-method", method)) == []


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("60s", 60_000),
        ("1m", 60_000),
        ("30", 30_000),
        ("1h 30m", 5_400_000),
        ("500ms", 500),
        ("1d", 86_400_000),
    ],
)
def test_times_become_milliseconds(text: str, ms: int) -> None:
    vs = parse_virtual_server(edited(VIRTUAL_SERVER, (f"{U0}.connect-timeout", text))).resource
    assert vs is not None and vs.upstreams[0].connect_timeout_ms == ms


def _vsr_problems(*changes: tuple[str, Any]) -> list[str]:
    return [
        str(p) for p in parse_virtual_server_route(edited(VIRTUAL_SERVER_ROUTE, *changes)).problems
    ]


def test_a_subroute_may_not_delegate_again() -> None:
    assert _vsr_problems(("spec.subroutes[0]", {"path": "/juice/x", "route": "other"})) == [
        "spec.subroutes[0].route: Forbidden: is not allowed",
        'spec.subroutes[0]: Invalid value: "": must specify exactly one of `action` or `splits`',
    ]


def test_subroutes_must_share_one_kind_of_path() -> None:
    assert _vsr_problems(("spec.subroutes[1].path", "=/juice")) == [
        'spec.subroutes[1].path: Invalid value: "=/juice": all subroutes must use the same path '
        "modifier type; got 'prefix' and 'exact'"
    ]


def _vsr_check(vs_host: str, vs_paths: tuple[str, ...], *changes: tuple[str, Any]) -> list[str]:
    vsr = parse_virtual_server_route(edited(VIRTUAL_SERVER_ROUTE, *changes)).resource
    assert vsr is not None
    return [str(p) for p in check_for_virtual_server(vsr, vs_host, vs_paths)]


def test_a_route_checked_against_its_virtual_server() -> None:
    assert _vsr_check("cafe.example.com", ("/juice",)) == []
    assert _vsr_check("tea.example.com", ("/juice",)) == [
        "spec.host: Invalid value: \"cafe.example.com\": must be equal to 'tea.example.com'"
    ]
    assert _vsr_check("cafe.example.com", ("/juice/orange",)) == [
        "spec.subroutes[1].path: Invalid value: \"/juice\": must start with '/juice/orange'"
    ]
    assert _vsr_check("cafe.example.com", ("=/juice",)) == [
        'spec.subroutes: Invalid value: "subroutes": must have only one subroute if exact '
        "match is being used"
    ]
    assert _vsr_check("cafe.example.com", ("/juice", "/x")) == [
        'spec.subroutes: Invalid value: "subroutes": multiple VS route paths are only '
        "supported for regex routes"
    ]
    exact = ("spec.subroutes", [{"path": "= /juice", "action": {"pass": "juice"}}])
    assert _vsr_check("cafe.example.com", ("=/juice",), exact) == []


def test_the_message_is_kubernetes_aggregate_error() -> None:
    """NIC puts this text in status.message and the Rejected Event."""
    assert parse_virtual_server(VIRTUAL_SERVER).message() == ""
    one = parse_virtual_server(edited(VIRTUAL_SERVER, ("spec.host", "")))
    assert one.message() == "spec.host: Required value"
    two = parse_virtual_server(
        edited(VIRTUAL_SERVER, ("spec.host", ""), (f"{U0}.port", 0), ("spec.upstreams[1].port", 0))
    )
    assert two.message() == (
        "[spec.host: Required value, spec.upstreams[0].port: Invalid value: 0: must be between 1 "
        "and 65535, inclusive, spec.upstreams[1].port: Invalid value: 0: must be between 1 and "
        "65535, inclusive]"
    )
