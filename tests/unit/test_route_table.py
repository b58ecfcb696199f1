"""ferryman.wire.route_table: the records read back as routes, one row each.

The golden vectors (tests/golden/wire/push.json) are what ferryman's encoders
really write for every kind; the table must say what they route, in the words
of the resources they came from."""

from __future__ import annotations

import base64

from hypothesis import example, given
from hypothesis import strategies as st

from ferryman.configs.model import Route, VirtualHost
from ferryman.configs.routes import encode_host, route_tables
from ferryman.wire.route_table import COLUMNS, Row, rows, table
from testkit.wire_vectors import load

HOLDERS = {
    ("H", "cafe.example.com"): "Ingress/default/cafe",
    ("V", "vs.example.com"): "VirtualServer/default/vs",
    ("S", "golden-tcp"): "TransportServer/default/ts-tcp",
}


def _golden() -> list[Row]:
    full = next(p for p in load() if p.name == "full")
    records = {(kind, key): value for kind, key, value in full.records}
    return rows(records, HOLDERS.get)


def _cells(found: list[Row], host: str) -> list[tuple[str, ...]]:
    return [(r.object, r.path, r.match, r.action, r.upstream, r.endpoints)
            for r in found if r.host == host]  # fmt: skip


def test_an_ingress_host_is_its_paths_with_their_service_and_endpoints() -> None:
    found = _golden()
    assert _cells(found, "cafe.example.com") == [
        ("Ingress/default/cafe", "/coffee", "Exact", "proxy", "default/coffee:http",
         "127.0.55.2:8080 127.0.55.3:8080"),
        ("Ingress/default/cafe", "/tea", "Prefix", "proxy", "default/tea:80", "127.0.55.1:8080"),
        ("Ingress/default/cafe", "/v6", "Prefix", "proxy", "default/v6:80", "[fd00::55]:8080"),
    ]  # fmt: skip
    # The Secret a user named (not the certificate's hash), and the HTTPS redirect.
    assert {r.tls for r in found if r.host == "cafe.example.com"} == {"default/cafe-tls+redirect"}


def test_a_virtualserver_is_a_row_per_split_and_per_match() -> None:
    vs = "VirtualServer/default/vs"
    assert _cells(_golden(), "vs.example.com") == [
        (vs, "/tea", "Prefix", "proxy", "default/tea:80", "127.0.55.1:8080"),
        (vs, "/split", "Prefix,weight=30%", "proxy", "default/tea:80", "127.0.55.1:8080"),
        (vs, "/split", "Prefix,weight=70%", "proxy", "default/coffee:80",
         "127.0.55.2:8080 127.0.55.3:8080"),
        (vs, "/match", "Prefix,header:x-version=v2", "proxy", "default/coffee:80",
         "127.0.55.2:8080 127.0.55.3:8080"),
        (vs, "/match", "Prefix", "proxy", "default/tea:80", "127.0.55.1:8080"),
        (vs, "^/r[0-9]+$", "Regex", "proxy", "default/coffee:80",
         "127.0.55.2:8080 127.0.55.3:8080"),
        (vs, "/exact", "Exact", "return:200", "-", "-"),
        (vs, "/guarded", "Prefix", "proxy", "default/tea:80", "127.0.55.1:8080"),
        (vs, "/closed", "Prefix", "proxy", "default/tea:80", "127.0.55.1:8080"),
    ]  # fmt: skip
    routes = {r.path: r.policies for r in _golden() if r.host == "vs.example.com"}
    assert routes["/guarded"] == routes["/closed"] == "accessControl"


def test_policies_gateway_routes_and_transportservers_are_rows_too() -> None:
    found = _golden()
    mtls = [r for r in found if r.host == "mtls.example.com"]
    assert [(r.path, r.policies) for r in mtls] == [
        ("/", "ingressMTLS"),
        ("(unmatched)", "ingressMTLS"),
    ]
    assert _cells(found, "127.0.55.100:39080/gw.example.com") == [
        ("-", "/coffee", "Exact,header:x-cup=big,weight=3/4", "proxy", "default/coffee:80",
         "127.0.55.2:8080 127.0.55.3:8080"),
        ("-", "/coffee", "Exact,header:x-cup=big,weight=1/4", "proxy", "default/tea:80",
         "127.0.55.1:8080"),
        ("-", "/tea", "PathPrefix", "proxy", "default/tea:80", "127.0.55.1:8080"),
    ]  # fmt: skip
    assert _cells(found, "listener:golden-tcp") == [
        ("TransportServer/default/ts-tcp", "-", "stream", "proxy:random2lc", "default/echo:7000",
         "127.0.55.4:7000"),
    ]  # fmt: skip
    assert [r.tls for r in found if r.host == "listener:golden-tls"] == ["terminated"]


def test_the_table_has_a_header_and_one_line_per_route_grep_finds() -> None:
    text = table(_golden())
    header, *lines = text.splitlines()
    assert header.split() == list(COLUMNS)
    assert len(lines) == len(_golden())
    coffee = [line for line in lines if "default/coffee:80" in line]
    assert len(coffee) == 4  # every way a request reaches the Service
    assert table([]) == ""


def test_a_backend_without_endpoints_says_503() -> None:
    found = rows({("H", "a.test"): "- 0 - rr:1:10 P|/|default/gone:80"}, lambda k: None)
    assert [(r.object, r.endpoints) for r in found] == [("-", "(none:503)")]


_PATHS = st.from_regex(r"/[a-z0-9/._-]{0,12}", fullmatch=True)
_BACKENDS = st.sampled_from(["default/a:80", "default/b:http", "other/c:8080"])


@given(
    routes=st.lists(st.builds(Route, st.booleans(), _PATHS, _BACKENDS), max_size=8),
    default=st.none() | _BACKENDS,
)
def test_every_ingress_path_in_an_h_record_is_one_row(
    routes: list[Route], default: str | None
) -> None:
    vh = VirtualHost("h.test", tuple(routes), default)
    found = rows({("H", "h.test"): encode_host(vh)}, lambda k: None)
    exact, prefix = route_tables(routes)
    want = {(p, "Exact", b) for p, b in exact.items()} | {
        (p, "Prefix", b) for p, b in prefix.items()
    }
    if default:
        want.add(("(default)", "any", default))
    assert {(r.path, r.match, r.upstream) for r in found} == want
    assert len(found) == len(want)


@given(value=st.text(min_size=0, max_size=20))
def test_a_condition_value_is_one_cell_whatever_it_holds(value: str) -> None:
    """A user's value with a space or line break must not break the columns."""
    b64 = base64.b64encode(value.encode()).decode()
    var = base64.b64encode(b"http_x_a").decode()
    upstream = "U|default/a:80|rr|1|10|-|-|-|0||0.-.-.-.-"
    record = f"- {upstream} R|P|Lw==|0|{var}.{b64}>100:p.1..|100:p.1..||"
    (first, _) = rows({("V", "h.test"): record}, lambda k: None)
    assert first.match.startswith("Prefix,header:x-a=")
    assert not any(c.isspace() for c in first.match)


_GRAMMAR = "|.:,;>&^~ -!=/0123456789abcpdtUPRGSEL"


@given(
    kind=st.sampled_from("HVWS"),
    value=st.text(alphabet=_GRAMMAR, min_size=1, max_size=60),
)
@example(kind="H", value="- 0 - rr:1:10 P||default/a:80")  # an empty path
@example(kind="V", value="- R|Z")  # too few fields
def test_no_record_breaks_the_table(kind: str, value: str) -> None:
    """render must not fail on a record its reader does not follow (a newer
    grammar): each row is a route, or the record is said not decoded."""
    found = rows({(kind, "h.test"): value}, lambda k: "Kind/ns/name")
    assert all(r.object == "Kind/ns/name" and r.host.endswith("h.test") for r in found)
    for r in found:
        cells = [getattr(r, c.lower()) for c in COLUMNS[:-1]]
        # One awk field each: never empty, never a space.
        assert all(c and not any(ch.isspace() for ch in c) for c in cells), r
