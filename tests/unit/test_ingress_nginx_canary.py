"""ingress-nginx's canary, the pure decision: parsing, pairing, the per-request rule."""

from __future__ import annotations

from collections import Counter

from ferryman.configs.record_text import unquote
from ferryman.kinds.ingress.parse.ingress_nginx_canary import PREFIX, Canary, parse_canary
from ferryman.kinds.ingress.records.canary import (
    Member,
    Rule,
    canary_matches,
    canary_percent,
    canary_route_fields,
    goes_to_canary,
    pair_canaries,
)
from ferryman.kinds.virtualserver.records.locations import first_match, source_variable


def ann(**kw: str) -> dict[str, str]:
    return {PREFIX + k.replace("_", "-"): v for k, v in kw.items()}


def test_not_a_canary_without_the_flag() -> None:
    canary, problems = parse_canary(ann(canary_weight="30"))
    assert canary is None
    assert problems and "canary-weight" in problems[0]
    assert parse_canary({}) == (None, [])
    assert parse_canary(ann(canary="false"))[0] is None


def test_parse_defaults_and_values() -> None:
    assert parse_canary(ann(canary="true")) == (Canary(), [])
    canary, problems = parse_canary(
        ann(
            canary="true",
            canary_by_header="X-Canary",
            canary_by_cookie="beta",
            canary_weight="3",
            canary_weight_total="10",
        )
    )
    assert problems == []
    assert canary == Canary(header="X-Canary", cookie="beta", weight=3, weight_total=10)


def test_parse_problems() -> None:
    canary, problems = parse_canary(ann(canary="true", canary_weight="x", canary_weight_total="-1"))
    assert canary == Canary()
    assert len(problems) == 2
    canary, problems = parse_canary(ann(canary="true", canary_weight="150"))
    assert canary is not None and canary.weight == 100
    assert "above the total" in problems[0]
    canary, problems = parse_canary(ann(canary="true", canary_by_header_value="on"))
    assert canary == Canary()
    assert "no " + PREFIX + "canary-by-header" in problems[0]
    canary, problems = parse_canary(
        ann(
            canary="true",
            canary_by_header="h",
            canary_by_header_value="on",
            canary_by_header_pattern="^o",
        )
    )
    assert canary == Canary(header="h", header_value="on")
    assert "pattern ignored" in problems[0]
    canary, problems = parse_canary(
        ann(canary="true", canary_by_header="h", canary_by_header_pattern="(")
    )
    assert canary is not None and canary.header_pattern == "("
    assert "never matches" in problems[0]


def test_other_annotations_on_a_canary_are_ignored_and_said() -> None:
    annotations = ann(canary="true", rewrite_target="/", load_balance="ewma")
    annotations["nginx.org/proxy-connect-timeout"] = "5s"
    canary, problems = parse_canary(annotations)
    assert canary == Canary()
    assert problems == [
        f"{PREFIX}rewrite-target, nginx.org/proxy-connect-timeout ignored on a canary "
        "Ingress: the main Ingress's annotations apply",
        f"{PREFIX}load-balance on a canary Ingress: not applied by ferryman yet; "
        "the main Ingress's balancing and affinity apply to the canary's backends",
    ]


def test_header_and_cookie_names_are_checked() -> None:
    canary, problems = parse_canary(
        ann(canary="true", canary_by_header="X Bad", canary_by_cookie="a;b", canary_weight="5")
    )
    assert canary == Canary(weight=5)
    assert len(problems) == 2
    assert "canary-by-header: 'X Bad'" in problems[0]
    assert "canary-by-cookie: 'a;b'" in problems[1]


def test_header_precedence() -> None:
    c = Canary(header="X-Canary", cookie="beta", weight=0)
    assert goes_to_canary(c, {"x-canary": "always"}, {}, 1)
    assert not goes_to_canary(c, {"x-canary": "never"}, {"beta": "always"}, 1)
    # any other value: the cookie, then the weight decide
    assert goes_to_canary(c, {"x-canary": "maybe"}, {"beta": "always"}, 1)
    assert not goes_to_canary(c, {"x-canary": "maybe"}, {}, 1)
    # the header wins over the weight both ways
    assert not goes_to_canary(Canary(header="X-Canary", weight=100), {"x-canary": "never"}, {}, 1)


def test_header_value_and_pattern() -> None:
    v = Canary(header="X-Canary", header_value="beta", weight=0)
    assert goes_to_canary(v, {"x-canary": "beta"}, {}, 1)
    assert not goes_to_canary(v, {"x-canary": "always"}, {}, 1)
    # with a value set, "never" is just another value: the weight decides
    assert goes_to_canary(
        Canary(header="h", header_value="beta", weight=100), {"h": "never"}, {}, 1
    )
    p = Canary(header="X-Canary", header_pattern="^(be|ga)ta$")
    assert goes_to_canary(p, {"x-canary": "gata"}, {}, 1)
    assert not goes_to_canary(p, {"x-canary": "alpha"}, {}, 1)
    # a failing pattern routes to the main, the cookie is not read
    bad = Canary(header="h", header_pattern="(", cookie="c")
    assert not goes_to_canary(bad, {"h": "x"}, {"c": "always"}, 1)


def test_cookie_over_weight() -> None:
    c = Canary(cookie="beta", weight=100)
    assert not goes_to_canary(c, {}, {"beta": "never"}, 1)
    assert goes_to_canary(Canary(cookie="beta"), {}, {"beta": "always"}, 1)
    assert goes_to_canary(c, {}, {"beta": "other"}, 1)


def test_weights() -> None:
    def share(c: Canary) -> int:
        draws = range(1, c.weight_total + 1)
        return Counter(goes_to_canary(c, {}, {}, d) for d in draws)[True]

    assert share(Canary(weight=0)) == 0
    assert share(Canary(weight=100)) == 100
    assert share(Canary(weight=30)) == 30
    assert share(Canary(weight=3, weight_total=10)) == 3


def member(name: str, age: str, rules: list[tuple[str, str]], c: Canary | None) -> Member:
    return Member(name, (age, name), frozenset(Rule(h, p) for h, p in rules), c)


def test_pairing() -> None:
    c1, c2 = Canary(weight=10), Canary(weight=20)
    pairing = pair_canaries(
        [
            member("ns/canary-b", "3", [("a.example", "/")], c2),
            member("ns/main", "1", [("a.example", "/"), ("a.example", "/x")], None),
            member("ns/canary-a", "2", [("a.example", "/"), ("b.example", "/")], c1),
            member("ns/other-main", "4", [("a.example", "/")], None),
        ]
    )
    assert pairing.joined == {Rule("a.example", "/"): ("ns/main", "ns/canary-a", c1)}
    assert pairing.left_out == {
        "ns/canary-a": ("b.example/: no main Ingress serves it",),
        "ns/canary-b": ("a.example/: ns/canary-a is already its canary (one canary per rule)",),
    }


def test_a_canary_alone_is_not_served() -> None:
    pairing = pair_canaries([member("ns/c", "1", [("a", "/")], Canary())])
    assert pairing.joined == {}
    assert list(pairing.left_out) == ["ns/c"]


def _routed(c: Canary, headers: dict[str, str], cookies: dict[str, str]) -> bool | None:
    """What the VirtualServer matches decide; None: the split decides."""
    matches = canary_matches(c)
    conditions = [[(source_variable(m.kind, m.name), unquote(m.value))] for m in matches]
    variables = {source_variable("header", k): v for k, v in headers.items()}
    variables |= {source_variable("cookie", k): v for k, v in cookies.items()}
    found = first_match(conditions, variables)
    return None if found is None else matches[found].to_canary


def test_matches_decide_as_ingress_nginx() -> None:
    canaries = [
        Canary(header="X-Canary", cookie="beta"),
        Canary(header="X-Canary", header_value="Beta.1", cookie="beta"),
        Canary(header="X-Canary", header_pattern="^(be|ga)ta", cookie="beta"),
        Canary(header="X-Canary", header_value='a\\b"c', cookie="beta"),
        Canary(header="X-Canary", header_pattern=r"^\w+\.\d$"),
        Canary(cookie="beta"),
        Canary(),
    ]
    values = ["always", "never", "Always", "Beta.1", "beta.1", "Betax1", "gata", "other"]
    values += ['a\\b"c', "a\\\\b", None]
    for c in canaries:
        for h in values:
            for k in values:
                headers = {} if h is None else {"x-canary": h}
                cookies = {} if k is None else {"beta": k}
                routed = _routed(c, headers, cookies)
                for weight in (0, 100):
                    w = Canary(**{**c.__dict__, "weight": weight})
                    expected = goes_to_canary(w, headers, cookies, 1)
                    got = weight == 100 if routed is None else routed
                    assert got == expected, (c, h, k, weight)


def test_percent() -> None:
    assert canary_percent(Canary(weight=30)) == (30, None)
    assert canary_percent(Canary(weight=3, weight_total=10)) == (30, None)
    assert canary_percent(Canary(weight=1, weight_total=1000))[0] == 1
    percent, problem = canary_percent(Canary(weight=1, weight_total=3))
    assert percent == 33 and problem is not None


def test_route_fields() -> None:
    from ferryman.configs.record_text import b64

    matches, default = canary_route_fields(Canary(header="X-C", weight=30), "M", "C")
    always = f"{b64('http_x_c')}.{b64('~^always$')}>100:C"
    never = f"{b64('http_x_c')}.{b64('~^never$')}>100:M"
    assert matches == f"{always};{never}"
    assert default == "70:M,30:C"
    assert canary_route_fields(Canary(), "M", "C") == ("", "100:M")
    assert canary_route_fields(Canary(weight=100), "M", "C") == ("", "100:C")
    matches, _ = canary_route_fields(Canary(cookie="b"), "M", "C")
    assert matches.startswith(b64("cookie_b") + ".")
