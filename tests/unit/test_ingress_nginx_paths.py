"""ingress-nginx's use-regex, rewrite-target, app-root and redirects
(kinds/ingress/parse/ingress_nginx_paths.py) and the V record they make."""

from __future__ import annotations

import base64
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferryman.kinds.ingress.parse import ingress_nginx_paths as paths
from ferryman.kinds.ingress.parse.ingress import parse_ingress
from ferryman.kinds.ingress.parse.ingress_nginx import KNOWN_NOT_YET, PREFIX, translate
from ferryman.kinds.ingress.records.hosts import ingress_records
from ferryman.kinds.ingress.records.virtual_hosts import virtual_hosts
from ferryman.resources.meta import InvalidResource

P = PREFIX


def _ingress(annotations: dict[str, str], *paths_: tuple[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": "i", "namespace": "default", "annotations": annotations},
        "spec": {
            "ingressClassName": "ferryman",
            "rules": [
                {
                    "host": "a.test",
                    "http": {
                        "paths": [
                            {
                                "path": p,
                                "pathType": t,
                                "backend": {"service": {"name": "s", "port": {"number": 80}}},
                            }
                            for p, t in paths_ or (("/", "Prefix"),)
                        ]
                    },
                }
            ],
        },
    }


def _routes(annotations: dict[str, str], *paths_: tuple[str, str]) -> list[list[str]]:
    ing = parse_ingress(_ingress(annotations, *paths_))
    vhosts, _ = virtual_hosts(ing, ["a.test"], {})
    out = ingress_records(ing, vhosts, None, "ferryman", {})  # type: ignore[arg-type]
    (written,) = out.written
    assert written.routing is not None
    return [i.split("|") for i in written.routing.split(" ") if i.startswith("R|")]


def _decoded(text: str) -> str:
    return base64.b64decode(text).decode()


def test_the_group_is_served_not_listed_as_not_yet() -> None:
    for key in ("use-regex", "rewrite-target", "app-root", "permanent-redirect"):
        assert key not in KNOWN_NOT_YET
    assert "temporal-redirect-code" not in KNOWN_NOT_YET


@pytest.mark.parametrize(
    ("given_", "regex"),
    [
        ({P + "use-regex": "true"}, "case_insensitive"),
        ({P + "use-regex": "True"}, "case_insensitive"),
        ({P + "rewrite-target": "/"}, "case_insensitive"),  # implies use-regex
        ({P + "use-regex": "false"}, None),
        ({P + "use-regex": "false", P + "rewrite-target": "/$1"}, "case_insensitive"),
    ],
)
def test_regex_paths_as_nics_case_insensitive(given_: dict[str, str], regex: str | None) -> None:
    assert translate(given_, {}).annotations.get("nginx.org/path-regex") == regex


def test_nginx_orgs_path_regex_wins() -> None:
    out = translate({P + "use-regex": "true", "nginx.org/path-regex": "case_sensitive"}, {})
    assert out.annotations["nginx.org/path-regex"] == "case_sensitive"
    assert any("nginx.org/path-regex is set and wins" in w for w in out.warnings)


def test_regex_paths_pass_validation_only_with_the_annotation() -> None:
    regex = ("/something(/|$)(.*)", "ImplementationSpecific")
    with pytest.raises(InvalidResource):
        parse_ingress(_ingress({}, regex))
    ing = parse_ingress(_ingress({P + "rewrite-target": "/$2"}, regex))
    assert ing.paths.rewrite_target == "/$2"


@pytest.mark.parametrize("bad", ["/a;b", "/a b", "/x{abc}", "/(unclosed", "//x"])
def test_nics_checks_on_regexes_hold(bad: str) -> None:
    with pytest.raises(InvalidResource):
        parse_ingress(_ingress({P + "use-regex": "true"}, (bad, "ImplementationSpecific")))


def test_the_v_record_rewrites_caseless_with_the_groups() -> None:
    (route,) = _routes(
        {P + "rewrite-target": "/$2"}, ("/something(/|$)(.*)", "ImplementationSpecific")
    )
    assert route[1] == "I"
    assert _decoded(route[2]) == "^/something(/|$)(.*)"
    action = route[5].split(":", 1)[1].split(".")
    assert action[0] == "p" and _decoded(action[2]) == "/$2"
    assert "i" in route[8]


def test_a_path_equal_to_its_target_is_not_rewritten() -> None:
    (route,) = _routes({P + "rewrite-target": "/"}, ("/", "Prefix"))
    assert route[5].split(":", 1)[1].split(".")[2] == ""


def test_app_root_is_an_exact_root_answering_302() -> None:
    routes = _routes({P + "app-root": "/app"}, ("/", "Prefix"))
    root = routes[0]
    assert (root[1], _decoded(root[2])) == ("E", "/")
    kind, code, url = root[5].split(":", 1)[1].split(".")
    assert (kind, code, _decoded(url)) == ("d", "302", "${scheme}://${http_host}/app")
    assert routes[1][5].split(":", 1)[1].startswith("p.")  # the rest is proxied


def test_every_path_answers_the_redirect_temporal_first() -> None:
    routes = _routes(
        {
            P + "permanent-redirect": "https://p.example",
            P + "temporal-redirect": "https://t.example$request_uri",
            P + "temporal-redirect-code": "307",
        },
        ("/", "Prefix"),
        ("/x", "Exact"),
    )
    for r in routes:
        kind, code, url = r[5].split(":", 1)[1].split(".")
        assert (kind, code, _decoded(url)) == ("d", "307", "https://t.example${request_uri}")


@pytest.mark.parametrize(
    ("given_", "expected"),
    [
        ({P + "permanent-redirect": "https://x.example"}, (301, "https://x.example")),
        (
            {P + "permanent-redirect": "https://x.example", P + "permanent-redirect-code": "308"},
            (308, "https://x.example"),
        ),
        (
            {P + "permanent-redirect": "https://x.example", P + "permanent-redirect-code": "999"},
            (301, "https://x.example"),
        ),
        ({P + "temporal-redirect": "http://y.example/z"}, (302, "http://y.example/z")),
        ({P + "temporal-redirect": "$scheme://y.example"}, (302, "${scheme}://y.example")),
        ({P + "permanent-redirect": "https://x.example/$remote_addr"}, None),
        ({P + "permanent-redirect": "ftp://x.example"}, None),
        ({P + "permanent-redirect": 'https://x.example/"'}, None),
    ],
)
def test_redirect_values(given_: dict[str, str], expected: tuple[int, str] | None) -> None:
    warnings: list[str] = []
    assert paths.paths(given_, warnings).redirect == expected
    if expected is None or "999" in str(given_):
        assert warnings


_VAR_USE = re.compile(r"\$\{([a-z_]+)\}")


@given(st.text(max_size=40))
def test_a_redirect_url_keeps_only_known_variables(value: str) -> None:
    url, problem = paths.redirect_url("https://h.example/" + value)
    if url is None:
        assert problem
        return
    assert not re.search(r"[\s\"'\\<>]", url)
    assert set(_VAR_USE.findall(url)) <= paths._VARIABLES
    assert "$" not in _VAR_USE.sub("", url)


@given(st.text(max_size=40))
def test_a_target_is_a_path_with_groups_only(value: str) -> None:
    if paths.target(value) is None:
        assert value.startswith("/")
        assert not re.search(r"[\s;\"'\\{}?#]", value)
        assert re.fullmatch(r"[^$]*(\$[0-9][^$]*)*", value)


@given(st.text(max_size=40))
def test_an_invalid_target_or_root_is_not_applied_with_a_warning(value: str) -> None:
    warnings: list[str] = []
    got = paths.paths({P + "rewrite-target": value, P + "app-root": value}, warnings)
    if value.strip():
        assert (got.rewrite_target is None) == (paths.target(value.strip()) is not None)
        assert (got.app_root is None) == (paths.app_root(value.strip()) is not None)
        assert len(warnings) == (got.rewrite_target is None) + (got.app_root is None)


# NIC's nginx.org/rewrite-target and nginx.org/app-root (the same records).


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("https://x/y", "absolute URLs not allowed"),
        ("//x", "protocol-relative"),
        ("/a/../b", "path traversal"),
        ("/a;b", "NGINX configuration syntax characters"),
        ("/a{b}", "NGINX configuration syntax characters"),
    ],
)
def test_nics_rewrite_target_checks(value: str, message: str) -> None:
    with pytest.raises(InvalidResource, match=re.escape(message)):
        parse_ingress(_ingress({"nginx.org/rewrite-target": value}))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("/", "cannot be '/'"),
        ("/a/", "should not end with '/'"),
        ("/a$b", "must not contain the following characters"),
        ("/a~b", "'~'"),
        ("//a", "protocol-relative"),
    ],
)
def test_nics_app_root_checks(value: str, message: str) -> None:
    with pytest.raises(InvalidResource, match=re.escape(message)):
        parse_ingress(_ingress({"nginx.org/app-root": value}))


def test_nics_rewrite_target_on_a_plain_path_replaces_the_uri() -> None:
    routes = _routes({"nginx.org/rewrite-target": "/beans"}, ("/coffee", "Prefix"))
    for r in routes:
        assert _decoded(r[5].split(":", 1)[1].split(".")[2]) == "/beans"
        assert r[8] == "w"


def test_nics_rewrite_target_on_regex_paths_by_case() -> None:
    regex = ("/tea/(.*)", "ImplementationSpecific")
    (sensitive,) = _routes(
        {"nginx.org/rewrite-target": "/$1", "nginx.org/path-regex": "case_sensitive"}, regex
    )
    assert (sensitive[1], sensitive[8] if len(sensitive) > 8 else "") == ("X", "")
    (caseless,) = _routes(
        {"nginx.org/rewrite-target": "/$1", "nginx.org/path-regex": "case_insensitive"}, regex
    )
    assert (caseless[1], caseless[8]) == ("I", "i")


def test_nics_rewrites_win_over_rewrite_target() -> None:
    ing = parse_ingress(
        _ingress(
            {"nginx.org/rewrite-target": "/x", "nginx.org/rewrites": "serviceName=s rewrite=/y"}
        )
    )
    vhosts, _ = virtual_hosts(ing, ["a.test"], {})
    out = ingress_records(ing, vhosts, None, "ferryman", {})  # type: ignore[arg-type]
    assert any("mutually exclusive" in w for w in out.warnings)


def test_nginx_orgs_app_root_wins_over_ingress_nginxs() -> None:
    out = translate({P + "app-root": "/a", "nginx.org/app-root": "/b"}, {})
    assert out.paths.app_root is None
    assert any("nginx.org/app-root is set and wins" in w for w in out.warnings)
    routes = _routes({P + "app-root": "/a", "nginx.org/app-root": "/b"})
    url = routes[0][5].split(":", 1)[1].split(".")[2]
    assert _decoded(url) == "${scheme}://${http_host}/b"


def _redirect_field(annotations: dict[str, str]) -> str:
    ing = parse_ingress(_ingress(annotations))
    vhosts, _ = virtual_hosts(ing, ["a.test"], {})
    out = ingress_records(ing, vhosts, None, "ferryman", {})  # type: ignore[arg-type]
    (written,) = out.written
    assert written.routing is not None
    return written.routing.split(" ")[0]


@pytest.mark.parametrize(
    ("given_", "field"),
    [
        ({P + "force-ssl-redirect": "true"}, "308:t"),
        ({P + "force-ssl-redirect": "true", P + "preserve-trailing-slash": "true"}, "308:s"),
        ({P + "force-ssl-redirect": "true", "nginx.org/redirect-to-https": "true"}, "301:i"),
    ],
)
def test_force_ssl_redirect_in_the_v_record(given_: dict[str, str], field: str) -> None:
    assert _redirect_field(given_) == field


def test_force_ssl_redirect_off_or_invalid_is_no_redirect() -> None:
    warnings: list[str] = []
    assert paths.paths({P + "force-ssl-redirect": "yes"}, warnings).force_ssl_redirect is None
    assert warnings
    assert paths.paths({P + "force-ssl-redirect": "false"}, []).force_ssl_redirect is None


def test_server_alias_adds_rules_as_the_first_host() -> None:
    ing = parse_ingress(_ingress({P + "server-alias": "b.test, A.test, bad_host!, a.test"}))
    assert ing.hosts() == ("a.test", "b.test")
    warnings: list[str] = []
    assert paths.paths({P + "server-alias": "x.test,,bad host"}, warnings).aliases == ("x.test",)
    assert len(warnings) == 1


def test_from_to_www_hosts() -> None:
    spec = {"rules": [{"host": "a.test"}, {"host": "www.b.test"}, {"host": "b.test"}]}
    assert paths.www_of(spec) == (("www.a.test", "a.test"),)
    spec = {"rules": [{"host": "www.c.test"}, {"host": "*.d.test"}, {}]}
    assert paths.www_of(spec) == (("c.test", "www.c.test"),)
    ing = parse_ingress(_ingress({P + "from-to-www-redirect": "true"}))
    assert ing.hosts() == ("a.test", "www.a.test")
