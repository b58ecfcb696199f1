"""auth-url's further settings as read (kinds/ingress/parse/ingress_nginx_auth.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferryman.kinds.ingress.parse import ingress_nginx_auth as auth
from ferryman.kinds.ingress.parse.ingress_nginx import translate
from ferryman.kinds.policy.parse.external_auth import ExternalAuth
from ferryman.kinds.policy.records.external import External

P = "nginx.ingress.kubernetes.io/"
SPEC = {"rules": [{"host": "a.test", "http": {"paths": []}}]}
URL = "http://oauth2-proxy:4180/oauth2/auth"

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "M": 2592000, "y": 31536000}


def _auth(extra: dict[str, str]) -> tuple[ExternalAuth | None, list[str], list[str]]:
    t = translate({P + "auth-url": URL, **extra}, SPEC)
    policies = [p for p in t.policies if isinstance(p, ExternalAuth)]
    return (policies[0] if policies else None), t.warnings, t.problems


@given(st.lists(st.tuples(st.integers(0, 999), st.sampled_from(sorted(UNITS))), min_size=1))
def test_nginx_times_add_up(parts: list[tuple[int, str]]) -> None:
    text = "".join(f"{n}{u}" for n, u in parts)
    assert auth.seconds(text) == sum(n * UNITS[u] for n, u in parts)


@given(st.text(max_size=12))
def test_a_time_is_digits_and_units_or_nothing(text: str) -> None:
    got = auth.seconds(text)
    if got is not None:
        assert text and text[0].isdigit() and set(text) <= set("0123456789smhdwMy")


def test_cache_duration_as_proxy_cache_valid() -> None:
    assert auth.cache_valid("200 202 10m, 401 5m") == (((200, 202), 600), ((401,), 300))
    assert auth.cache_valid("any 1h") == (((), 3600),)
    assert auth.cache_valid("30s") == (((200, 301, 302), 30),)
    for bad in ("", "abc 5m", "600 5m", "200 5x"):
        with pytest.raises(auth.Bad):
            auth.cache_valid(bad)


def test_defaults_and_settings_reach_the_record() -> None:
    a, warnings, problems = _auth({})
    assert a is not None and not warnings and not problems
    assert (a.request_redirect, a.set_cookie, a.cache_key) == ("${request_uri}", "success", "")
    a, warnings, problems = _auth(
        {
            P + "auth-request-redirect": "https://$host/after",
            P + "auth-always-set-cookie": "true",
            P + "auth-cache-key": "$remote_user$http_authorization",
        }
    )
    assert a is not None and not warnings and not problems
    assert a.request_redirect == "https://${host}/after" and a.set_cookie == "always"
    assert a.cache_key == "${remote_user}${http_authorization}"
    assert a.cache_valid == (((200, 202, 401), 300),)  # ingress-nginx's default
    record = External("ns/svc:80", "/auth", False, "", "rd", (), False, b"", 1, "",
                      a.request_redirect, a.set_cookie, a.cache_key, a.cache_valid)  # fmt: skip
    fields = record.fields()
    assert fields[6:9] == ("", "", "") and fields[10] == "always"
    assert fields[12] == "200.202.401=300"
    assert all(" " not in f and "|" not in f for f in fields)


def test_values_not_applied_are_said_and_unsafe_ones_refused() -> None:
    a, warnings, problems = _auth(
        {P + "auth-cache-key": "$request_body", P + "auth-cache-duration": "soon"}
    )
    assert a is not None and a.cache_key == "" and not problems
    assert any("auth-cache-key" in w and "nothing is cached" in w for w in warnings)
    a, warnings, _ = _auth(
        {P + "auth-cache-key": "$http_authorization", P + "auth-cache-duration": "soon"}
    )
    assert a is not None and a.cache_valid == (((200, 202, 401), 300),)
    assert any("auth-cache-duration" in w for w in warnings)
    a, warnings, _ = _auth({P + "auth-cache-key": "fixed"})
    assert a is not None and a.cache_key == "fixed"
    assert any("names no variable" in w for w in warnings)
    _, warnings, _ = _auth({P + "auth-keepalive": "10", P + "auth-keepalive-share-vars": "true"})
    assert sum("keepalive" in w for w in warnings) == 2
    _, _, problems = _auth({P + "auth-request-redirect": "$secret_var"})
    assert problems and "auth-request-redirect" in problems[0]
    _, _, problems = _auth({P + "auth-request-redirect": "/a\r\nX-Evil: 1"})
    assert problems
    _, _, problems = _auth({P + "auth-proxy-set-headers": "ns/headers"})
    assert problems and "auth-proxy-set-headers: refused" in problems[0]
    # Without auth-url: a Warning, not a rejection.
    t = translate({P + "auth-cache-key": "x"}, SPEC)
    assert not t.problems and any("needs" not in w and "auth-url" in w for w in t.warnings)


@given(st.text(max_size=40))
def test_any_redirect_is_refused_or_safe_in_a_header(value: str) -> None:
    a, _, problems = _auth({P + "auth-request-redirect": value})
    if not problems and value.strip():
        assert a is not None
        assert not any(ord(c) < 0x20 or ord(c) == 0x7F for c in a.request_redirect)


def test_auth_tls_error_page_with_its_secret() -> None:
    from ferryman.kinds.policy.parse.policy import IngressMTLS

    tls = {P + "auth-tls-secret": "ca"}
    t = translate({**tls, P + "auth-tls-error-page": "https://certs.example/help"}, SPEC)
    (m,) = [p for p in t.policies if isinstance(p, IngressMTLS)]
    assert m.error_page == "https://certs.example/help" and not t.problems
    for bad in ("$scheme://x", "https://a b", "certs.example", "/x\r\nSet-Cookie: a=b"):
        t = translate({**tls, P + "auth-tls-error-page": bad}, SPEC)
        assert t.problems and "auth-tls-error-page" in t.problems[0], bad
    t = translate({P + "auth-tls-error-page": "/help"}, SPEC)
    assert not t.problems and any("auth-tls-error-page" in w for w in t.warnings)
