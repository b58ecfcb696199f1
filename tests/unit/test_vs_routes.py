"""The VirtualServer routing reference (kinds/virtualserver/records/locations.py) and its records
(kinds/virtualserver/records/virtualserver.py): NGINX's location precedence, NIC's condition values,
NGINX's quoted-string reading, and records no value can break."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferryman.configs.record_text import unquote
from ferryman.configs.secret_state import SecretState
from ferryman.kinds.virtualserver.parse.virtualserver import VirtualServer, parse_virtual_server
from ferryman.kinds.virtualserver.records.locations import (
    Found,
    Location,
    condition_holds,
    find_location,
    rewrite,
)
from ferryman.kinds.virtualserver.records.virtualserver import vs_records
from ferryman.wire.push import record_problem

LOCATIONS = [
    Location("", "/"),
    Location("=", "/exact"),
    Location("", "/images"),
    Location("~", r"\.png$"),
    Location("^~", "/static"),
    Location("~*", "/case"),
    Location("", "/tea/", proxies=True),
    Location("=", "/coffee/", proxies=True),
]


@pytest.mark.parametrize(
    ("uri", "found"),
    [
        ("/", Found(0)),
        ("/exact", Found(1)),
        ("/exact/x", Found(0)),
        ("/images/a.png", Found(3)),  # a regex beats the longest prefix
        ("/static/a.png", Found(4)),  # ^~ does not look at regexes
        ("/x/CASE", Found(5)),
        ("/tea", Found(6, redirect=True)),  # auto_redirect, before regexes
        ("/coffee", Found(7, redirect=True)),  # exact locations redirect too
        ("/tea/", Found(6)),
        ("/teapot", Found(0)),  # prefixes are strings
    ],
)
def test_nginx_location_precedence(uri: str, found: Found) -> None:
    assert find_location(LOCATIONS, uri) == found


def test_a_location_named_the_uri_beats_the_auto_redirect() -> None:
    locs = [Location("", "/tea/", proxies=True), Location("", "/tea")]
    assert find_location(locs, "/tea") == Found(1)
    assert find_location([Location("", "/a")], "/") is None


@pytest.mark.parametrize(
    ("value", "actual", "holds"),
    [
        ("v2", "V2", True),  # map's strings are caseless
        ("v2", "v20", False),
        ("!v2", "v3", True),
        ("!v2", "", True),
        ("", "", True),
        ("~^y", "yes", True),
        ("~^y", "Yes", False),
        ("~*^y", "Yes", True),
        ("~.*", "", False),  # map never matches a regex against an empty value
        ("!~.*", "", True),
        ("\\default", "default", True),  # NIC escapes map's special words
    ],
)
def test_condition_values_as_nginx_map(value: str, actual: str, holds: bool) -> None:
    assert condition_holds(value, actual) is holds


def test_unquote_reads_as_nginx() -> None:
    assert unquote('a \\"b\\" \\\\ \\n\\t\\x') == 'a "b" \\ \n\t\\x'


def _vs(**spec: Any) -> VirtualServer:
    obj = {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": {"name": "v", "namespace": "ns"},
        "spec": {
            "host": "v.example.com",
            "upstreams": [{"name": "up", "service": "svc", "port": 8080}],
            **spec,
        },
    }
    parsed = parse_virtual_server(obj)
    assert parsed.resource is not None, parsed.message()
    return parsed.resource


_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=40
).filter(lambda t: '"' not in t and "$" not in t and not t.endswith("\\"))


# A condition value NIC reads as a regular expression (``~``, ``!~``) must
# compile; the encoding under test is the same for any other value.
_literal = _text.filter(lambda t: not t.removeprefix("!").startswith("~"))


@given(body=_text, value=_literal)
def test_records_hold_any_accepted_value_as_base64_only(body: str, value: str) -> None:
    routes = [
        {
            "path": "/a",
            "matches": [
                {"conditions": [{"header": "X-A", "value": value}], "action": {"pass": "up"}}
            ],
            "action": {"return": {"body": body}},
        }
    ]
    out = vs_records(_vs(routes=routes), None)
    assert record_problem(("V", "v.example.com"), out.record) is None
    assert out.record.count(" ") == 2  # redirect, one upstream, one route
    encoded = out.record.split(" ")[2].split("|")
    assert base64.b64decode(encoded[2]).decode() == "/a"
    assert out.backends == {"ns/svc:8080"}
    assert out.host.routes == ()  # the stub: the fast path routes nothing of it


def test_unimplemented_fields_are_warnings_naming_them() -> None:
    vs = _vs(
        upstreams=[{"name": "up", "service": "svc", "port": 80, "client-body-buffer-size": "16k"}],
        routes=[
            {
                "path": "/",
                "action": {"pass": "up"},
                "policies": [{"name": "limit"}],
            },
            {"path": "/r", "route": "other"},
        ],
    )
    warnings = vs_records(vs, SecretState("cert", None)).warnings
    assert warnings == (
        "spec.upstreams[0].client-body-buffer-size: "
        "client_body_buffer_size takes no variable; ignored",
        "Policy ns/limit is missing or invalid",
    )  # a delegation is resolved apart (vs_delegation), its warnings the VS's


@pytest.mark.parametrize(
    ("loc", "rewrite_path", "uri", "sent"),
    [
        (Location("", "/tea"), "/leaf", "/tea/green", "/leaf/green"),
        (Location("=", "/juice"), "/fruit", "/juice", "/fruit"),
        (Location("~", "/coffee/(.*)$"), "/beans/$1", "/coffee/dark", "/beans/dark"),
        # NIC's rewrite is case-sensitive even for ~*: no match, URI unchanged
        (Location("~*", "/coffee/(.*)$"), "/beans/$1", "/COFFEE/dark", "/COFFEE/dark"),
    ],
)
def test_rewrite_path_as_nic_configures_it(
    loc: Location, rewrite_path: str, uri: str, sent: str
) -> None:
    assert rewrite(loc, rewrite_path, uri) == sent
