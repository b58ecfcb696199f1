"""Properties of the NIC resource parsers over generated input: valid resources parse clean,
split weights are valid exactly when NIC says so, and no value that could reach NGINX carries a
character NGINX's syntax would read."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ferryman.kinds.policy.parse.policy import parse_policy
from ferryman.kinds.virtualserver.parse.route import split_path
from ferryman.kinds.virtualserver.parse.virtualserver import parse_virtual_server
from testkit.nic_edit import edited
from testkit.nic_fixtures import POLICIES, VIRTUAL_SERVER, meta

labels = st.from_regex(r"[a-z]([-a-z0-9]{0,8}[a-z0-9])?", fullmatch=True)
hosts = st.builds(
    lambda wildcard, parts: ("*." if wildcard else "") + ".".join(parts),
    st.booleans(),
    st.lists(labels, min_size=1, max_size=3),
)
segments = st.from_regex(r"[A-Za-z0-9._~-]{1,8}", fullmatch=True).filter(lambda s: s != "..")
prefix_paths = st.lists(segments, max_size=3).map(lambda parts: "/" + "/".join(parts))
regex_paths = st.builds(
    lambda modifier, space, parts: f"{modifier}{space}^/{'/'.join(parts)}(/.*)?$",
    st.sampled_from(["~", "~*"]),
    st.sampled_from(["", " ", "  "]),
    st.lists(st.from_regex(r"[a-z0-9]{1,6}", fullmatch=True), min_size=1, max_size=3),
)
route_paths = st.one_of(prefix_paths, prefix_paths.map(lambda p: "=" + p), regex_paths)


@st.composite
def weights(draw: st.DrawFn) -> list[int]:
    """Two to five weights summing to 100."""
    cuts = sorted(draw(st.lists(st.integers(0, 100), min_size=1, max_size=4)))
    return [b - a for a, b in zip([0, *cuts], [*cuts, 100], strict=True)]


@st.composite
def virtual_servers(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(labels, min_size=1, max_size=4, unique=True))
    upstreams = [
        {"name": n, "service": draw(labels), "port": draw(st.integers(1, 65535))} for n in names
    ]
    paths = draw(
        st.lists(route_paths, min_size=1, max_size=6, unique_by=lambda p: str(split_path(p)))
    )
    routes = []
    for path in paths:
        kind = draw(st.sampled_from(["pass", "splits", "redirect", "return"]))
        route: dict[str, Any] = {"path": path}
        if kind == "pass":
            route["action"] = {"pass": draw(st.sampled_from(names))}
        elif kind == "splits":
            route["splits"] = [
                {"weight": w, "action": {"pass": draw(st.sampled_from(names))}}
                for w in draw(weights())
            ]
        elif kind == "redirect":
            url = f"https://{draw(labels)}.example{draw(prefix_paths)}"
            code = draw(st.sampled_from([301, 302, 307, 308]))
            route["action"] = {"redirect": {"url": url, "code": code}}
        else:
            body = draw(
                st.text(st.characters(codec="utf-8", exclude_characters='"\\$'), max_size=20)
            )
            body = "".join(c for c in body if c in "\t\n" or c.isprintable())
            route["action"] = {"return": {"code": 200, "body": body or "ok"}}
        routes.append(route)
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": meta(draw(labels)),
        "spec": {"host": draw(hosts), "upstreams": upstreams, "routes": routes},
    }


@settings(max_examples=200)
@given(virtual_servers())
def test_any_valid_virtual_server_parses_without_problems(doc: dict[str, Any]) -> None:
    parsed = parse_virtual_server(doc)
    assert parsed.problems == ()
    assert parsed.resource is not None
    assert [str(r.path) for r in parsed.resource.routes] == [
        str(split_path(r["path"])) for r in doc["spec"]["routes"]
    ]


@given(st.sampled_from(["~", "~*", "=", "^~"]), st.text(" \t", max_size=3), prefix_paths)
def test_whitespace_after_a_modifier_does_not_change_the_path(
    modifier: str, space: str, path: str
) -> None:
    assert str(split_path(modifier + space + path)) == modifier + path


@given(st.lists(st.integers(-50, 150), max_size=5))
def test_splits_are_valid_exactly_when_nic_says(ws: list[int]) -> None:
    splits = [{"weight": w, "action": {"pass": "tea"}} for w in ws]
    doc = edited(VIRTUAL_SERVER, ("spec.routes[1].splits", splits))
    valid = len(ws) >= 2 and all(0 <= w <= 100 for w in ws) and sum(ws) == 100
    # no splits at all leaves the route without action: refused too
    assert (parse_virtual_server(doc).problems == ()) == valid


# (field path in the rich VirtualServer, a valid value, where characters may go in)
_TOKEN_FIELDS = [
    ("spec.host", "cafe.example.com", 0),
    ("spec.tls.secret", "cafe-secret", 0),
    ("spec.upstreams[0].name", "tea", 0),
    ("spec.upstreams[0].service", "tea-svc", 0),
    ("spec.upstreams[0].lb-method", "hash $request_uri", 6),
    ("spec.upstreams[0].next-upstream", "error", 0),
    ("spec.upstreams[0].buffer-size", "8k", 0),
    ("spec.routes[0].path", "/tea/leaf", 1),
    ("spec.routes[1].path", "~ ^/coffee/(.*)$", 3),
    ("spec.routes[3].route", "juice/juice-routes", 0),
    ("spec.routes[0].policies[0].name", "jwt", 0),
    ("spec.routes[0].action.proxy.rewritePath", "/v2/x", 1),
    ("spec.routes[0].action.proxy.requestHeaders.set[0].name", "X-Client", 0),
    ("spec.routes[0].action.proxy.responseHeaders.hide[0]", "X-Powered-By", 0),
    ("spec.routes[1].matches[0].conditions[1].cookie", "flavour", 0),
    ("spec.routes[1].matches[0].conditions[2].argument", "size", 0),
    ("spec.routes[1].splits[1].action.redirect.url", "https://${host}${request_uri}", 0),
]
# Their text becomes words or numbers in the model: whitespace only separates.
_WORD_LISTS_AND_NUMBERS = ("spec.upstreams[0].next-upstream", "spec.upstreams[0].buffer-size")
# Quoted text: what may not appear unescaped there.
_TEXT_FIELDS = [
    ("spec.routes[2].action.return.body", "OK ${request_uri}", '"\x00\x01\x1b\x7f'),
    ("spec.routes[2].action.return.headers[0].value", "no-store", '"\n\r\x00$'),
    ("spec.routes[0].action.proxy.requestHeaders.set[0].value", "${remote_addr}", '"\n\r\x00'),
    ("spec.routes[1].matches[0].conditions[0].value", "v2", '"\n\r\x00'),
]
NGINX_SYNTAX = ";{}\"'\\` \t\n\r\x00\x0b\x0c"


@given(st.data())
def test_nginx_syntax_in_a_token_is_refused(data: st.DataObject) -> None:
    where, value, start = data.draw(st.sampled_from(_TOKEN_FIELDS))
    bad = data.draw(st.sampled_from(NGINX_SYNTAX))
    at = data.draw(st.integers(start, len(value)))
    if where.endswith("redirect.url"):  # after "https:" and outside "${...}"
        at = data.draw(st.sampled_from([6, 8, 10, 15]))
    if where in _WORD_LISTS_AND_NUMBERS and bad in " \t\n\r\x0b\x0c":
        return  # whitespace separates words there, and never travels as text
    if where.endswith("lb-method") and bad.isspace() and at == len(value):
        return  # NIC trims lb-method
    if value.startswith("~") and bad == "\\" and at < len(value):
        return  # an escape in a regular expression ("^\\/coffee"), which NIC accepts
    doc = edited(VIRTUAL_SERVER, (where, value[:at] + bad + value[at:]))
    found = parse_virtual_server(doc).problems
    assert any(p.field.startswith(where.split("[")[0]) for p in found), (where, found)


@given(st.data())
def test_unescaped_quotes_and_control_characters_in_text_are_refused(data: st.DataObject) -> None:
    where, value, forbidden = data.draw(st.sampled_from(_TEXT_FIELDS))
    bad = data.draw(st.sampled_from(forbidden))
    at = data.draw(st.sampled_from([0, len(value)]))
    doc = edited(VIRTUAL_SERVER, (where, value[:at] + bad + value[at:]))
    assert parse_virtual_server(doc).problems


_POLICY_FIELDS = [
    ("rate", "spec.rateLimit.key", "${binary_remote_addr}", [0]),
    ("jwt", "spec.jwt.secret", "jwk-secret", [0, 3]),
    ("basic", "spec.basicAuth.secret", "cafe-passwd", [0, 4]),
    ("api-key", "spec.apiKey.suppliedIn.query[0]", "api-key", [0, 3]),
    ("api-key", "spec.apiKey.suppliedIn.header[0]", "X-API-Key", [0, 3]),
    ("egress-mtls", "spec.egressMTLS.ciphers", "HIGH:!aNULL", [0, 4]),
    ("egress-mtls", "spec.egressMTLS.sslName", "backend.example.com", [0, 4]),
    ("cors", "spec.cors.allowOrigin[0]", "https://example.com", [8, 19]),
    ("allow", "spec.accessControl.allow[0]", "10.0.0.0/8", [0, 2]),
]


@given(st.data())
def test_nginx_syntax_in_a_policy_value_is_refused(data: st.DataObject) -> None:
    name, where, value, positions = data.draw(st.sampled_from(_POLICY_FIELDS))
    bad = data.draw(st.sampled_from(NGINX_SYNTAX))
    at = data.draw(st.sampled_from(positions))
    doc = copy.deepcopy(next(p for p in POLICIES if p["metadata"]["name"] == name))
    found = parse_policy(edited(doc, (where, value[:at] + bad + value[at:]))).problems
    assert found, (where, value[:at] + bad + value[at:])


@given(st.sampled_from('"$\n\r\x00'), st.sampled_from([0, 2, 6]))
def test_quotes_variables_and_line_breaks_in_a_realm_are_refused(bad: str, at: int) -> None:
    realm = "My API"[:at] + bad + "My API"[at:]
    jwt = next(p for p in POLICIES if p["metadata"]["name"] == "jwt")
    assert parse_policy(edited(jwt, ("spec.jwt.realm", realm))).problems
