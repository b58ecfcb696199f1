"""ferryman.resources.validation: the whitelist between user input and NGINX."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ferryman.resources import validation

# Characters NGINX gives a meaning to in an unquoted or quoted token.
NGINX_SIGNIFICANT = set(";{}\"'$\\#")
PATH_TYPES = ("Exact", "Prefix", "ImplementationSpecific")


def nginx_safe(value: str) -> bool:
    return not any(c in NGINX_SIGNIFICANT or c.isspace() or not c.isprintable() for c in value)


# ---- hosts --------------------------------------------------------------------------

LABEL_63 = "a" * 63
HOST_253 = ".".join([LABEL_63, LABEL_63, LABEL_63, "b" * 61])
assert len(HOST_253) == 253


@pytest.mark.parametrize(
    "host",
    [
        "example.com",
        "a.b.example.com",
        "x",
        "a-b.c-d",
        "0.example.com",
        "123abc.example.com",
        f"{LABEL_63}.example.com",
        HOST_253,
        "*.example.com",
        "*.a.b.example.com",
        "*.com",
    ],
)
def test_host_accepts_dns_names_and_leading_wildcards(host: str) -> None:
    assert validation.host(host) is None


@pytest.mark.parametrize(
    "host",
    [
        "",
        "*",
        "*.",
        "**.example.com",
        "*foo.example.com",
        "f*o.example.com",
        "foo.*.example.com",
        "example.*",
        "*.*.example.com",
        "1.2.3.4",
        "10.0.0.1",
        "::1",
        "2001:db8::1",
        "[::1]",
        "example.com:80",
        "Example.com",
        "EXAMPLE.COM",
        "*.Example.com",
        "a_b.example.com",
        "-a.example.com",
        "a-.example.com",
        "a..example.com",
        ".example.com",
        "example.com.",
        f"{LABEL_63}a.example.com",
        f"*.{LABEL_63}a.example.com",
        HOST_253 + "b",
        "exa mple.com",
        "example.com;",
        "example.com\n",
        "*.example.com\n",
        "example.com\r",
    ],
)
def test_host_rejects(host: str) -> None:
    assert validation.host(host) is not None


def test_host_reasons_are_specific() -> None:
    assert "wildcard" in (validation.host("foo.*.example.com") or "")
    assert "IP" in (validation.host("1.2.3.4") or "")
    assert "63" in (validation.host(f"{LABEL_63}a.example.com") or "")
    assert "253" in (validation.host(HOST_253 + "b") or "")
    assert "lower case" in (validation.host("Example.com") or "")


def test_wildcard_host_counts_towards_the_253_character_limit() -> None:
    # The API server (IsWildcardDNS1123Subdomain) limits the whole value,
    # "*." included, to 253 characters.
    host = "*." + ".".join([LABEL_63, LABEL_63, LABEL_63, "b" * 61])
    assert len(host) == 255
    assert validation.host(host) is not None
    assert validation.host("*." + HOST_253[2:]) is None  # exactly 253


# ---- paths --------------------------------------------------------------------------

VALID_PATHS = [
    "/",
    "/foo",
    "/foo/",
    "/foo/bar",
    "/foo/bar/",
    "/a-b_c.d~e",
    "/.well-known/acme-challenge",
    "/foo..",
    "/..foo",
    "/foo/..bar",
    "/foo/.bar",
    "/@user",
    "/a:b",
    "/a=b&c=d",
    "/(x)",
    "/a*b",
    "/a+b,c!",
    "/UPPER/Case",
]


@pytest.mark.parametrize("path_type", PATH_TYPES)
@pytest.mark.parametrize("path", VALID_PATHS)
def test_path_accepts(path: str, path_type: str) -> None:
    assert validation.http_path(path, path_type) is None


@pytest.mark.parametrize("path_type", ["Exact", "Prefix"])
@pytest.mark.parametrize(
    "path, reason",
    [
        ("foo", "absolute"),
        ("", "absolute"),
        ("//", "'//'"),
        ("/a//b", "'//'"),
        ("/a/./b", "'/./'"),
        ("/a/../b", "'/../'"),
        ("/../b", "'/../'"),
        ("/a/..", "'/..'"),
        ("/..", "'/..'"),
        ("/a/.", "'/.'"),
        ("/.", "'/.'"),
    ],
)
def test_exact_and_prefix_follow_api_server_rules(path: str, reason: str, path_type: str) -> None:
    problem = validation.http_path(path, path_type)
    assert problem is not None
    assert reason in problem


@pytest.mark.parametrize("path", ["/a//b", "/a/./b", "/a/../b", "/a/..", "/a/."])
def test_implementation_specific_allows_what_the_api_server_allows(path: str) -> None:
    assert validation.http_path(path, "ImplementationSpecific") is None


def test_implementation_specific_must_still_be_absolute() -> None:
    assert validation.http_path("foo", "ImplementationSpecific") is not None


HOSTILE = [";", "{", "}", '"', "'", "$", " ", "\t", "\n", "\r", "\v", "\\", "%", "#", "?", "\0"]


@pytest.mark.parametrize("path_type", PATH_TYPES)
@pytest.mark.parametrize("char", HOSTILE, ids=repr)
@pytest.mark.parametrize("where", ["middle", "end"])
def test_path_rejects_nginx_significant_characters(char: str, where: str, path_type: str) -> None:
    path = f"/a{char}b" if where == "middle" else f"/a{char}"
    assert validation.http_path(path, path_type) is not None


def test_path_rejection_names_the_characters() -> None:
    problem = validation.http_path("/a;b{c", "Prefix") or ""
    assert "';'" in problem
    assert "'{'" in problem


def test_percent_encoding_is_explained() -> None:
    assert "percent" in (validation.http_path("/a%2Fb", "Prefix") or "")


# ---- ports and names ----------------------------------------------------------------


@pytest.mark.parametrize("number", [1, 80, 8080, 65535])
def test_port_number_accepts(number: int) -> None:
    assert validation.port_number(number) is None


@pytest.mark.parametrize("number", [0, -1, 65536, "80", 80.0, True, None])
def test_port_number_rejects(number: object) -> None:
    assert validation.port_number(number) is not None


@pytest.mark.parametrize("name", ["http", "https", "h2c", "a", "web-1", "1a", "abcdefghijklmno"])
def test_port_name_accepts(name: str) -> None:
    assert validation.port_name(name) is None


@pytest.mark.parametrize(
    "name",
    ["", "abcdefghijklmnop", "HTTP", "-http", "http-", "a--b", "123", "h_p", "http;", "http\n"],
)
def test_port_name_rejects(name: str) -> None:
    assert validation.port_name(name) is not None


@pytest.mark.parametrize("name", ["svc", "a", "svc-1", "a" * 63])
def test_service_name_accepts(name: str) -> None:
    assert validation.dns1035_label(name) is None


@pytest.mark.parametrize("name", ["", "1svc", "Svc", "svc-", "svc_1", "a.b", "a" * 64, "svc\n"])
def test_service_name_rejects(name: str) -> None:
    assert validation.dns1035_label(name) is not None


# ---- properties ---------------------------------------------------------------------

_HOSTILE_CHARS = st.sampled_from([*NGINX_SIGNIFICANT, " ", "\t", "\n", "\r", "\0"])
_ALPHABET = st.one_of(st.sampled_from(list("ab/.-*:_~A")), _HOSTILE_CHARS)


def _spliced(safe: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Mostly-acceptable text with one hostile character somewhere, often at the end."""
    return st.builds(lambda a, c, b: a + c + b, safe, _HOSTILE_CHARS, st.one_of(st.just(""), safe))


_safe_paths = st.builds(lambda s: "/" + s, st.text(alphabet="abz/-_~.", max_size=12))
_texts = st.one_of(
    st.text(),
    st.text(alphabet=_ALPHABET),
    st.builds(lambda s: "/" + s, st.text(alphabet=_ALPHABET)),
    st.builds(lambda s: "/" + s, st.text()),
    _spliced(_safe_paths),
)


@given(value=_texts, path_type=st.sampled_from(PATH_TYPES))
@example(value="/foo\n", path_type="Prefix")
@example(value="/foo\n", path_type="Exact")
def test_accepted_paths_are_nginx_safe(value: str, path_type: str) -> None:
    if validation.http_path(value, path_type) is None:
        assert value.startswith("/")
        assert nginx_safe(value), f"accepted {value!r}"


_safe_hosts = st.sampled_from(["example.com", "*.example.com", "a", "http", "svc-1"])
_host_texts = st.one_of(
    st.text(),
    st.text(alphabet=st.one_of(st.sampled_from(list("ab0.-*")), _HOSTILE_CHARS)),
    _spliced(_safe_hosts),
)


@given(value=_host_texts)
@example(value="example.com\n")
@example(value="*.example.com\n")
def test_accepted_hosts_are_nginx_safe(value: str) -> None:
    if validation.host(value) is None:
        assert nginx_safe(value), f"accepted {value!r}"
        assert value == value.lower()


@given(value=_host_texts)
@example(value="http\n")
def test_accepted_port_and_service_names_are_nginx_safe(value: str) -> None:
    for check in (validation.port_name, validation.dns1035_label):
        if check(value) is None:
            assert nginx_safe(value), f"{check.__name__} accepted {value!r}"
