"""Regular expressions are checked by PCRE, the library that runs them
(resources/pcre.py), wherever a user writes one."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ferryman.kinds.gateway.parse.gateway_api import parse_http_route
from ferryman.kinds.policy.parse.policy import parse_policy
from ferryman.resources.pcre import pcre_error, regex_value_error

# Accepted by Python's re, refused by PCRE2 (the escape) or by the PCRE that
# Debian's ngx.re links (option resets, PCRE2 only): each once became a route
# that never matched.
REFUSED = [r"^/admin\u0061", r"^/v(?^i)1", "^/a(", "[z-a]", r"(?<=a+)b"]
# Refused by Python's re, run by PCRE: not to be refused.
ACCEPTED = [r"^/admin(/[a-z0-9]+)*/?$", r"^/a\Kb", r"^/(?<n>x)\k<n>$", "^/[[:alpha:]]+$"]


def test_pcres_own_dialect_decides() -> None:
    assert [p for p in REFUSED if pcre_error(p) is None] == []
    assert [p for p in ACCEPTED if pcre_error(p) is not None] == []
    assert pcre_error(r"^/admin\u0061") == (
        r"PCRE2 does not support \F, \L, \l, \N{name}, \U, or \u at offset 9"
    )
    assert pcre_error("a\0b") == "a regular expression must not hold a NUL character"


def test_a_map_value_is_a_regex_only_after_a_tilde() -> None:
    assert regex_value_error(r"\u0061") is None  # a string: compared as written
    assert regex_value_error("~^(a") == (
        "must be a valid regular expression: missing closing parenthesis at offset 3"
    )
    assert regex_value_error("~*^(a") is not None
    assert regex_value_error("~*^a$") is None


@given(st.text(max_size=64))
def test_any_text_is_answered_without_a_crash(pattern: str) -> None:
    error = pcre_error(pattern)
    assert error is None or error.strip()


def _route(match: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "r", "namespace": "ns"},
        "spec": {"parentRefs": [{"name": "gw"}], "rules": [{"matches": [match]}]},
    }


def test_http_route_regular_expressions_are_checked() -> None:
    path = {"path": {"type": "RegularExpression", "value": r"/admin\u0061"}}
    header = {"headers": [{"type": "RegularExpression", "name": "x-v", "value": "v(?^i)1"}]}
    query = {"queryParams": [{"type": "RegularExpression", "name": "q", "value": "(a"}]}
    for match, where in [(path, "path.value"), (header, "headers[0].value")]:
        problems = [str(p) for p in parse_http_route(_route(match)).problems]
        assert len(problems) == 1 and where in problems[0], problems
        assert "must be a valid regular expression" in problems[0]
    assert parse_http_route(_route(query)).problems
    quoting = {"path": {"type": "RegularExpression", "value": r"\Q/a"}}
    (problem,) = [str(p) for p in parse_http_route(_route(quoting)).problems]
    assert "matched whole, as ^(?:\\Q/a)$" in problem, problem
    fine = {"path": {"type": "RegularExpression", "value": r"/a\Kb"}}
    assert not parse_http_route(_route(fine)).problems


def test_a_rate_limit_tier_regex_is_checked() -> None:
    def policy(match: str) -> list[str]:
        condition = {"variables": [{"name": "$request_method", "match": match}]}
        limit = {"rate": "5r/s", "key": "${uri}", "zoneSize": "1M", "condition": condition}
        raw = {
            "apiVersion": "k8s.nginx.org/v1",
            "kind": "Policy",
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"rateLimit": limit},
        }
        return [str(p) for p in parse_policy(raw).problems]

    assert policy("~^(GET|POST)$") == []
    (problem,) = policy("~^(GET")
    assert "spec.rateLimit.condition.variables[0].match" in problem
    assert "missing closing parenthesis" in problem
