"""kinds/gateway/records/fast.py: HTTPRoute matches as the module's F record.

The property: for any set of path matches and any request path, a location
the record serves (NGINX's choice, kinds/virtualserver/records/locations.py,
the module's reference) sends the request where Gateway API's first matching
entry (ferryman_gateway_routes.lua's ``first``) sends it; anything else is slow.
"""

from __future__ import annotations

import base64

from hypothesis import given, settings
from hypothesis import strategies as st

from ferryman.kinds.gateway.parse.filters import Filter
from ferryman.kinds.gateway.parse.gateway_api import Match, Rule, ValueMatch
from ferryman.kinds.gateway.records.attach import RouteEntry, _precedence
from ferryman.kinds.gateway.records.fast import gateway_fast_record
from ferryman.kinds.virtualserver.records.locations import Location, find_location


def _b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


def entry(
    path_type: str,
    path: str,
    backends: tuple[tuple[str, str | None, int, int], ...] = (("ns", "svc", 80, 1),),
    headers: tuple[ValueMatch, ...] = (),
    filters: tuple[Filter, ...] = (),
    **kw: object,
) -> RouteEntry:
    m = Match(path_type, path, headers=headers)
    rule = Rule(matches=(m,), filters=filters, backends=())
    return RouteEntry("ns/r", rule, m, backends, **kw)  # type: ignore[arg-type, unused-ignore]


def test_prefix_route_to_one_service() -> None:
    record = gateway_fast_record([entry("PathPrefix", "/p0")])
    up = _b64("ns/svc:80")
    assert record == (
        f"1 u {up} 0 1 10000 0 0 0 0"
        f" l E {_b64('/p0')} 0 f 0 1 100 1"
        f" l N {_b64('/p0/')} 0 f 0 1 100 1"
        f" l N {_b64('/')} 0 s"
    )


def test_root_prefix_and_exact() -> None:
    record = gateway_fast_record([entry("Exact", "/a/"), entry("PathPrefix", "/")])
    assert record is not None
    items = record.split(" l ")[1:]
    assert items == [f"E {_b64('/a/')} 0 f 0 1 100 1", f"N {_b64('/')} 0 f 0 1 100 1"]


def test_weights_out_of_100() -> None:
    backends = (("ns", "a", 80, 1), ("ns", "b", 80, 3), ("ns", "c", 80, 0))
    record = gateway_fast_record([entry("Exact", "/x", backends)])
    assert record is not None and record.endswith(
        f"l E {_b64('/x')} 0 f 0 2 25 1 75 2 l N Lw== 0 s"
    )
    assert f"u {_b64('ns/c:80')}" not in record


def test_what_stays_slow() -> None:
    slow = [
        entry("Exact", "/x", (("ns", "a", 80, 1), ("ns", "b", 80, 2))),  # 33.3%: not exact
        entry("Exact", "/x", (("ns", "a", 80, 1), ("ns", None, 80, 1))),  # invalid: 500
        entry("Exact", "/x", (("ns", "a", 80, 0),)),  # no backend: 500
        entry("Exact", "/x", headers=(ValueMatch("Exact", "h", "v"),)),
        entry("Exact", "/x", filters=(Filter("RequestHeaderModifier"),)),
        entry("Exact", "/x", mirrors=(("ns", "m", 80, 100.0),)),
        entry("Exact", "/x", h2c=(True,)),
        entry("Exact", "/x", backend_filters=((Filter("RequestHeaderModifier"),),)),
        entry("Exact", "/x", tls=(object(),)),
    ]
    for e in slow:
        assert gateway_fast_record([e]) is None, e
    timed = entry("Exact", "/x")
    timed = RouteEntry(
        timed.route, Rule((timed.match,), (), (), request_timeout=5), timed.match, timed.backends
    )
    assert gateway_fast_record([timed]) is None


def test_what_attach_gives_every_backend_is_fast() -> None:
    # attach: one (empty) filter tuple per backend; no h2c or TLS mark.
    e = entry("Exact", "/x", backend_filters=((),), h2c=(False,), tls=(None,))
    assert gateway_fast_record([e]) is not None


def test_no_record_with_regex() -> None:
    assert (
        gateway_fast_record([entry("PathPrefix", "/a"), entry("RegularExpression", "/b.*")]) is None
    )


def test_conditional_first_entry_keeps_location_slow() -> None:
    # /a with a header match, then /a without: a request without the header
    # falls through to the second in Gateway API; the location is slow.
    record = gateway_fast_record(
        [
            entry("PathPrefix", "/a", headers=(ValueMatch("Exact", "h", "v"),)),
            entry("PathPrefix", "/a"),
        ]
    )
    assert record is None


_SEGMENTS = ["/a", "/b", "/ab", "/a/b", "/a/", "/", "/a/bc", "/b/a"]


@st.composite
def _entries(draw: st.DrawFn) -> list[RouteEntry]:
    out = []
    for i in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["Exact", "PathPrefix"]))
        path = draw(st.sampled_from(_SEGMENTS))
        headers = (ValueMatch("Exact", "h", "v"),) if draw(st.booleans()) and i % 2 else ()
        out.append(entry(kind, path, (("ns", f"s{i}", 80, 1),), headers=headers))
    out.sort(key=_precedence)
    return out


def _gateway_first(entries: list[RouteEntry], uri: str, header: bool) -> str | None:
    """ferryman_gateway_routes.lua's ``first``: the service of the first
    matching entry (a request carrying header h: v when ``header``)."""
    for e in entries:
        m = e.match
        assert isinstance(m, Match)
        if m.path_type == "Exact":
            hit = uri == m.path
        else:
            path = m.path.rstrip("/") or "/"
            hit = path == "/" or uri == path or uri.startswith(path + "/")
        if hit and (header or not m.headers):
            return e.backends[0][1]
    return None


def _module(record: str, uri: str) -> str | None:
    """The service the module proxies ``uri`` to, or None (slow)."""
    tokens = record.split()
    ups: list[str] = []
    locations: list[Location] = []
    targets: list[int | None] = []
    i = 1
    while i < len(tokens):
        if tokens[i] == "u":
            ups.append(base64.b64decode(tokens[i + 1]).decode())
            i += 9
            continue
        modifier = {"E": "=", "N": "^~"}[tokens[i + 1]]
        locations.append(Location(modifier, base64.b64decode(tokens[i + 2]).decode()))
        if tokens[i + 4] == "s":
            targets.append(None)
            i += 5
        else:
            assert tokens[i + 4 : i + 8] == ["f", "0", "1", "100"]
            targets.append(int(tokens[i + 8]))
            i += 9
    found = find_location(locations, uri)
    assert found is not None and not found.redirect  # the "^~ /" fallback
    target = targets[found.index]
    return None if target is None else ups[target - 1].split("/")[1].split(":")[0]


@settings(max_examples=400, deadline=None)
@given(
    _entries(),
    st.sampled_from([*_SEGMENTS, "/abc", "/a/b/c", "/b/", "/c", "/a/bcd"]),
    st.booleans(),
)
def test_module_answers_as_gateway_api(entries: list[RouteEntry], uri: str, header: bool) -> None:
    record = gateway_fast_record(entries)
    if record is None:
        return
    served = _module(record, uri)
    if served is not None:
        assert served == _gateway_first(entries, uri, header)
    elif all(not e.match.headers for e in entries if isinstance(e.match, Match)):
        # Without conditions only a request no entry matches is slow.
        assert _gateway_first(entries, uri, header) is None
