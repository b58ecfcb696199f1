"""W records: one per name a socket serves, each whole (the most specific
listener's routes, the name's own before wider hostnames'), and the listen
lines of the sockets."""

from __future__ import annotations

import base64

from hypothesis import given
from hypothesis import strategies as st

from ferryman.kinds.gateway.parse.gateway_api import Listener, Match, Rule
from ferryman.kinds.gateway.records.attach import RouteEntry
from ferryman.kinds.gateway.records.servers import (
    NO_FAST,
    Served,
    fast_records,
    records,
    render_listens,
)


def _listener(name: str, hostname: str | None, port: int = 80) -> Listener:
    return Listener(name, hostname, port, "HTTP", None, (), "Same", None, None)


def _entry(route: str, service: str, path: str = "/") -> RouteEntry:
    match = Match("PathPrefix", path)
    return RouteEntry(route, Rule((match,), (), ()), match, (("ns", service, 80, 1),))


def _services(record: str) -> list[str]:
    """The Services of a record's upstreams, in the order of its G items."""
    upstreams = [item.split("|")[1] for item in record.split(" ") if item.startswith("U|")]
    order = []
    for item in record.split(" "):
        if item.startswith("G|"):
            n = int(item.split("|")[4].split(":p.")[1].split(".")[0])
            order.append(upstreams[n - 1].split("/")[1].split(":")[0])
    return order


def test_a_names_own_routes_come_before_wider_ones() -> None:
    table = {
        "": [_entry("ns/any", "any")],
        "*.example.com": [_entry("ns/wild", "wild")],
        "a.example.com": [_entry("ns/exact", "exact")],
    }
    out, backends = records([Served("10.0.0.1", _listener("l", None), table, None)])
    assert sorted(out) == [
        "10.0.0.1:80/*.example.com",
        "10.0.0.1:80/_",
        "10.0.0.1:80/a.example.com",
    ]
    assert _services(out["10.0.0.1:80/a.example.com"]) == ["exact", "wild", "any"]
    assert _services(out["10.0.0.1:80/*.example.com"]) == ["wild", "any"]
    assert _services(out["10.0.0.1:80/_"]) == ["any"]
    assert all(v.startswith("- 0 ") for v in out.values())
    assert {b.split(":")[0] for b in backends} == {"ns/any", "ns/wild", "ns/exact"}


def test_an_exact_listener_takes_its_name_from_a_wildcard_one() -> None:
    wild = Served(
        "*", _listener("wild", "*.example.com"), {"a.example.com": [_entry("r", "w")]}, "cert-w"
    )
    exact = Served("*", _listener("exact", "a.example.com"), {}, "cert-a")
    out, _ = records([wild, exact])
    # a.example.com is the exact listener's: no routes there, its certificate.
    assert out["*:80/a.example.com"] == "cert-a 1 -"
    assert out["*:80/*.example.com"] == "cert-w 0 -"


_LABEL = st.sampled_from(["a", "b", "c"])
_NAME = st.lists(_LABEL, min_size=1, max_size=3).map(".".join)
_HOSTNAME = st.one_of(st.none(), _NAME, _NAME.map(lambda n: "*." + n))


def _lua_lookup(out: dict[str, str], socket: str, name: str) -> str | None:
    """ferryman_gateway.lua's order: the name, wildcards from the longest suffix, "_"."""
    labels = name.split(".")
    keys = [name] + ["*." + ".".join(labels[i:]) for i in range(1, len(labels))] + ["_"]
    return next((out[f"{socket}/{k}"] for k in keys if f"{socket}/{k}" in out), None)


@given(st.lists(_HOSTNAME, min_size=1, max_size=4, unique=True), _NAME)
def test_the_lookup_finds_the_most_specific_listener(
    hostnames: list[str | None], name: str
) -> None:
    served = [Served("*", _listener(f"l{i}", h), {}, f"cert{i}") for i, h in enumerate(hostnames)]
    out, _ = records(served)
    found = _lua_lookup(out, "*:80", name)

    def rank(h: str | None) -> int | None:
        if h is None:
            return 0
        if h == name:
            return 10_000
        if h.startswith("*.") and name.endswith(h[1:]) and len(name) > len(h) - 1:
            return len(h)
        return None

    ranked = [(r, i) for i, h in enumerate(hostnames) if (r := rank(h)) is not None]
    if not ranked:
        assert found is None
    else:
        best = max(ranked, key=lambda t: (t[0], -t[1]))[1]
        assert found == f"cert{best} {best} -"


def test_listen_lines() -> None:
    text = render_listens([("10.0.0.1", 80, False), ("*", 8443, True), ("10.0.0.1", 80, False)])
    # Every address: IPv6 too; a Gateway's own (IPv4) address: that one only.
    assert text.splitlines()[1:] == [
        "listen 8443 ssl http2;",
        "listen [::]:8443 ssl http2 ipv6only=on;",
        "listen 10.0.0.1:80;",
    ]
    assert render_listens([("*", 8443, True)], ipv6=False).splitlines()[1:] == [
        "listen 8443 ssl http2;"
    ]


def test_record_strings_are_base64() -> None:
    table = {"": [_entry("ns/r", "svc", "/a;b{}")]}
    out, _ = records([Served("10.0.0.1", _listener("l", None), table, None)])
    item = next(i for i in out["10.0.0.1:80/_"].split(" ") if i.startswith("G|"))
    assert base64.b64decode(item.split("|")[2]) == b"/a;b{}"


def test_an_x_record_beside_every_w_record_of_a_plaintext_socket() -> None:
    """Same keys as W on HTTP sockets, so the module's look-up stops where
    Lua's does (a name without fast routes included, as "-"); none on HTTPS
    sockets, whose requests stay Lua's; "-" past the record size limit."""
    https = Listener("s", "secure.example.com", 443, "HTTPS", "Terminate", (), "Same", None, None)
    served = [
        Served("10.0.0.1", _listener("wild", "*.example.com"), {"": [_entry("r", "w")]}, None),
        Served("10.0.0.1", _listener("held", "a.example.com"), {}, None),
        Served("10.0.0.1", https, {"secure.example.com": [_entry("r", "s")]}, "cert"),
    ]
    out, _ = records(served)
    fast = fast_records(served, 10_000)
    assert set(fast) == {k for k in out if k.startswith("10.0.0.1:80/")}
    assert fast["10.0.0.1:80/a.example.com"] == NO_FAST
    wild = fast["10.0.0.1:80/*.example.com"]
    assert wild.startswith("1 u ") and " f 0 1 100 1" in wild
    assert fast_records(served, len(wild) - 1)["10.0.0.1:80/*.example.com"] == NO_FAST
