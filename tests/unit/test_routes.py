"""ferryman.configs.routes and configs.ingress.virtual_hosts: Ingress paths -> the
tables NGINX's Lua router reads, with Kubernetes path semantics."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ferryman.configs.model import CATCH_ALL, Route, VirtualHost
from ferryman.configs.routes import (
    backends_of,
    decode_host,
    encode_host,
    match,
    route_tables,
)
from ferryman.configs.secret_state import SecretState
from ferryman.kinds.ingress.parse.ingress import Balancing, Ingress, parse_ingress
from ferryman.kinds.ingress.records.virtual_hosts import secret_names, virtual_hosts
from testkit.strategies import backend_keys

HOST = "a.example.com"


def make_ingress(
    paths: list[tuple[str, str, str]] | None = None,
    *,
    host: str | None = HOST,
    extra_rules: list[dict[str, Any]] | None = None,
    default_backend: str | None = None,
    tls: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
) -> Ingress:
    """``paths`` are (path, pathType, service); every backend uses port 80.

    ``host=None`` makes a host-less rule (the catch-all).
    """
    rules: list[dict[str, Any]] = []
    if paths is not None:
        rule: dict[str, Any] = {
            "http": {
                "paths": [
                    {
                        "path": p,
                        "pathType": t,
                        "backend": {"service": {"name": s, "port": {"number": 80}}},
                    }
                    for p, t, s in paths
                ]
            },
        }
        if host is not None:
            rule["host"] = host
        rules.append(rule)
    rules += extra_rules or []
    spec: dict[str, Any] = {"rules": rules}
    if default_backend:
        spec["defaultBackend"] = {"service": {"name": default_backend, "port": {"name": "web"}}}
    if tls is not None:
        spec["tls"] = tls
    md = {"name": "ing", "namespace": "ns", "annotations": annotations or {}}
    return parse_ingress({"kind": "Ingress", "metadata": md, "spec": spec})


def vhost(
    ing: Ingress, host: str = HOST, secrets: dict[str, SecretState] | None = None
) -> VirtualHost:
    (vh,), _ = virtual_hosts(ing, [host], secrets or {})
    return vh


def route(ing: Ingress, request: str, host: str = HOST) -> str | None:
    """The backend's service name (or None: 404) the router picks for ``request``."""
    vh = vhost(ing, host)
    exact, prefix = route_tables(vh.routes)
    picked = match(exact, prefix, vh.default_backend, request)
    return None if picked is None else picked.split("/")[1].split(":")[0]


def routes_of(paths: list[tuple[str, str, str]], requests: list[str]) -> list[str | None]:
    ing = make_ingress(paths)
    return [route(ing, r) for r in requests]


# ---- route_tables ------------------------------------------------------------------------


def test_route_tables_split_exact_and_prefix() -> None:
    exact, prefix = route_tables(
        [Route(True, "/a", "ns/x:80"), Route(False, "/a", "ns/y:80"), Route(False, "/", "ns/z:80")]
    )
    assert exact == {"/a": "ns/x:80"}
    assert prefix == {"/a": "ns/y:80", "/": "ns/z:80"}


def test_route_tables_keep_the_first_route_for_a_path() -> None:
    exact, prefix = route_tables(
        [
            Route(True, "/a", "ns/one:80"),
            Route(True, "/a", "ns/two:80"),
            Route(False, "/b", "ns/three:80"),
            Route(False, "/b", "ns/four:80"),
        ]
    )
    assert exact == {"/a": "ns/one:80"}
    assert prefix == {"/b": "ns/three:80"}


def test_route_tables_of_nothing_are_empty() -> None:
    assert route_tables([]) == ({}, {})


# ---- match ---------------------------------------------------------------------------------


def test_exact_matches_only_the_exact_path() -> None:
    assert routes_of([("/p", "Exact", "s")], ["/p", "/p/", "/p/x", "/px", "/", "/P"]) == [
        "s",
        None,
        None,
        None,
        None,
        None,
    ]


def test_exact_with_a_trailing_slash_matches_only_with_the_slash() -> None:
    assert routes_of([("/p/", "Exact", "s")], ["/p/", "/p", "/p/x"]) == ["s", None, None]


def test_prefix_matches_element_wise() -> None:
    requests = ["/foo", "/foo/", "/foo/bar", "/foo/bar/baz/", "/foobar", "/fo", "/", "/bar/foo"]
    assert routes_of([("/foo", "Prefix", "s")], requests) == [
        "s",
        "s",
        "s",
        "s",
        None,
        None,
        None,
        None,
    ]


def test_multi_element_prefix_matches_element_wise() -> None:
    requests = ["/a/b", "/a/b/", "/a/b/c", "/a/bc", "/a", "/a/"]
    assert routes_of([("/a/b", "Prefix", "s")], requests) == ["s", "s", "s", None, None, None]


def test_prefix_slash_matches_everything() -> None:
    assert routes_of([("/", "Prefix", "s")], ["/", "/x", "/x/y/", "//"]) == ["s"] * 4


def test_trailing_slash_on_a_prefix_rule_is_ignored() -> None:
    requests = ["/foo", "/foo/", "/foo/x", "/foox"]
    assert routes_of([("/foo/", "Prefix", "s")], requests) == ["s", "s", "s", None]
    assert vhost(make_ingress([("/foo/", "Prefix", "s")])).routes == (
        Route(False, "/foo", "ns/s:80"),
    )


def test_implementation_specific_is_prefix() -> None:
    requests = ["/p", "/p/", "/p/x", "/px", "/"]
    assert routes_of([("/p", "ImplementationSpecific", "s")], requests) == routes_of(
        [("/p", "Prefix", "s")], requests
    )


def test_longest_prefix_wins() -> None:
    paths = [("/", "Prefix", "root"), ("/foo", "Prefix", "foo"), ("/foo/bar", "Prefix", "bar")]
    requests = ["/", "/x", "/foobar", "/foo/x", "/foo/barbaz", "/foo/bar", "/foo/bar/baz"]
    assert routes_of(paths, requests) == ["root", "root", "root", "foo", "foo", "bar", "bar"]


def test_longest_wins_regardless_of_rule_order() -> None:
    paths = [("/foo/bar", "Prefix", "bar"), ("/foo", "Prefix", "foo")]
    assert routes_of(paths, ["/foo/bar/x", "/foo/x"]) == ["bar", "foo"]


def test_exact_beats_prefix_on_a_tie_in_either_order() -> None:
    for paths in (
        [("/p", "Prefix", "pre"), ("/p", "Exact", "ex")],
        [("/p", "Exact", "ex"), ("/p", "Prefix", "pre")],
    ):
        assert routes_of(paths, ["/p", "/p/", "/p/x"]) == ["ex", "pre", "pre"], paths


def test_exact_beats_a_shorter_prefix() -> None:
    paths = [("/a", "Prefix", "pre"), ("/a/b", "Exact", "ex")]
    assert routes_of(paths, ["/a/b", "/a/b/", "/a/bc"]) == ["ex", "pre", "pre"]


def test_first_rule_wins_on_duplicates() -> None:
    assert routes_of(
        [("/p", "Prefix", "one"), ("/p/", "Prefix", "two"), ("/p", "Prefix", "three")],
        ["/p", "/p/x"],
    ) == ["one", "one"]
    assert routes_of([("/p", "Exact", "one"), ("/p", "Exact", "two")], ["/p"]) == ["one"]
    assert routes_of(
        [("/p", "ImplementationSpecific", "one"), ("/p", "Prefix", "two")], ["/p/x"]
    ) == ["one"]


def test_unmatched_paths_go_to_the_default_backend() -> None:
    ing = make_ingress([("/p", "Exact", "s")], default_backend="catch")
    assert [route(ing, r) for r in ["/p", "/p/", "/", "/x"]] == ["s", "catch", "catch", "catch"]


def test_unmatched_paths_without_a_default_backend_are_none() -> None:
    assert match({}, {}, None, "/anything") is None
    assert match({"/a": "x"}, {"/b": "y"}, None, "/") is None


def test_prefix_slash_overrides_the_default_backend() -> None:
    ing = make_ingress([("/", "Prefix", "s")], default_backend="catch")
    assert [route(ing, r) for r in ["/", "/x"]] == ["s", "s"]


def test_match_on_raw_tables() -> None:
    exact = {"/a": "E"}
    prefix = {"/": "R", "/a/b": "AB"}
    assert match(exact, prefix, "D", "/a") == "E"
    assert match(exact, prefix, "D", "/a/") == "R"
    assert match(exact, prefix, "D", "/a/b/c") == "AB"
    assert match(exact, {}, "D", "/zzz") == "D"


def test_backend_key_names_namespace_service_and_port() -> None:
    vh = vhost(make_ingress([("/p", "Exact", "s")], default_backend="catch"))
    assert vh.routes == (Route(True, "/p", "ns/s:80"),)
    assert vh.default_backend == "ns/catch:web"
    assert backends_of(vh) == {"ns/s:80", "ns/catch:web"}


# ---- encode_host / decode_host -------------------------------------------------------------


def test_encode_host_format() -> None:
    vh = VirtualHost(
        host=HOST,
        routes=(
            Route(False, "/b", "ns/b:80"),
            Route(True, "/a", "ns/a:http"),
            Route(False, "/", "ns/root:80"),
            Route(True, "/a", "ns/second:80"),
        ),
        default_backend=None,
    )
    assert encode_host(vh) == "- 0 - rr:1:10 E|/a|ns/a:http P|/|ns/root:80 P|/b|ns/b:80"


def test_encode_host_tls_fields() -> None:
    base = VirtualHost(HOST, (), "ns/d:80")
    assert encode_host(base) == "- 0 ns/d:80 rr:1:10"
    with_cert = VirtualHost(HOST, (), None, tls=True, cert_id="ns/c@0123", redirect_https=True)
    assert encode_host(with_cert) == "ns/c@0123 1 - rr:1:10"
    unusable = VirtualHost(HOST, (), None, tls=True, cert_id=None)
    assert encode_host(unusable) == "! 0 - rr:1:10"
    assert decode_host("! 0 - lc:0:2.5") == ("!", False, None, {}, {})


_name = st.from_regex(r"[a-z]([a-z0-9-]{0,6}[a-z0-9])?", fullmatch=True)
_path_chars = "abcXYZ019-._~!*+,=:@&()"
_route_path = st.builds(
    lambda segs, slash: "/" + "/".join(segs) + ("/" if slash and segs else ""),
    st.lists(st.text(alphabet=_path_chars, min_size=1, max_size=5), max_size=4),
    st.booleans(),
)
_virtual_host = st.builds(
    VirtualHost,
    host=st.sampled_from([HOST, "*.example.com", CATCH_ALL]),
    routes=st.lists(st.builds(Route, st.booleans(), _route_path, backend_keys), max_size=8).map(
        tuple
    ),
    default_backend=st.one_of(st.none(), backend_keys),
    tls=st.booleans(),
    cert_id=st.one_of(st.none(), st.builds(lambda n: f"ns/{n}@0123456789abcdef", _name)),
    redirect_https=st.booleans(),
    balancing=st.builds(
        lambda *a: Balancing(*a).encode(),
        st.sampled_from(["rr", "lc"]),
        st.integers(0, 999999),
        st.sampled_from([0.001, 0.5, 1, 10, 60, 3600]),
    ),
)


@settings(max_examples=300)
@given(vh=_virtual_host)
def test_decode_host_inverts_encode_host(vh: VirtualHost) -> None:
    line = encode_host(vh)
    assert "\n" not in line
    assert "\t" not in line
    tls, redirect, default, exact, prefix = decode_host(line)
    want_tls = (vh.cert_id or "!") if vh.tls else "-"
    assert (tls, redirect, default) == (want_tls, vh.redirect_https, vh.default_backend)
    assert (exact, prefix) == route_tables(vh.routes)
    assert line.split(" ")[3] == vh.balancing  # not decoded, but in its place
    # Re-encoding what was decoded gives the same line.
    assert (
        encode_host(
            VirtualHost(
                vh.host,
                tuple(Route(True, p, b) for p, b in exact.items())
                + tuple(Route(False, p, b) for p, b in prefix.items()),
                default,
                tls=tls != "-",
                cert_id=tls if tls not in ("-", "!") else None,
                redirect_https=redirect,
                balancing=vh.balancing,
            )
        )
        == line
    )


# ---- virtual_hosts -------------------------------------------------------------------------


def test_rules_for_the_same_host_are_merged_and_other_hosts_kept_apart() -> None:
    def rule(host: str, path: str, svc: str) -> dict[str, Any]:
        backend = {"service": {"name": svc, "port": {"number": 80}}}
        return {
            "host": host,
            "http": {"paths": [{"path": path, "pathType": "Exact", "backend": backend}]},
        }

    ing = make_ingress(
        [("/one", "Exact", "s1")],
        extra_rules=[rule(HOST, "/two", "s2"), rule("b.example.com", "/three", "s3")],
    )
    a, b = virtual_hosts(ing, [HOST, "b.example.com"], {})[0]
    assert (a.host, b.host) == (HOST, "b.example.com")
    assert a.routes == (Route(True, "/one", "ns/s1:80"), Route(True, "/two", "ns/s2:80"))
    assert b.routes == (Route(True, "/three", "ns/s3:80"),)


def test_only_the_hosts_asked_for_get_virtual_hosts() -> None:
    ing = make_ingress([("/", "Prefix", "s")])
    assert virtual_hosts(ing, [], {}) == ([], [])


def test_catch_all_for_a_default_backend_only_ingress() -> None:
    ing = make_ingress(None, default_backend="catch")
    assert ing.hosts() == ("",)
    vh = vhost(ing, "")
    assert vh == VirtualHost(CATCH_ALL, (), "ns/catch:web")
    assert vh.host == "_"


def test_catch_all_for_host_less_rules() -> None:
    ing = make_ingress([("/p", "Prefix", "s")], host=None)
    assert ing.hosts() == ("",)
    vh = vhost(ing, "")
    assert vh.host == CATCH_ALL
    assert vh.routes == (Route(False, "/p", "ns/s:80"),)
    assert vh.tls is False
    assert vh.cert_id is None
    assert vh.redirect_https is False


def test_wildcard_hosts_are_kept_as_written() -> None:
    ing = make_ingress([("/", "Prefix", "s")], host="*.example.com")
    vh = vhost(ing, "*.example.com")
    assert vh.host == "*.example.com"
    assert encode_host(vh) == "- 0 - rr:1:10 P|/|ns/s:80"


# ---- TLS ------------------------------------------------------------------------------

TLS = [{"hosts": [HOST], "secretName": "a-tls"}]
CERT = "ns/a-tls@0123456789abcdef"


def test_tls_with_a_usable_secret() -> None:
    ing = make_ingress([("/", "Prefix", "s")], tls=TLS)
    (vh,), warnings = virtual_hosts(ing, [HOST], {"a-tls": SecretState(CERT, None)})
    assert (vh.tls, vh.cert_id, vh.redirect_https) == (True, CERT, True)
    assert warnings == []
    assert secret_names(ing) == {"a-tls"}
    assert decode_host(encode_host(vh))[:2] == (CERT, True)


def test_tls_with_a_missing_secret_rejects_handshakes_and_warns() -> None:
    ing = make_ingress([("/", "Prefix", "s")], tls=TLS)
    (vh,), warnings = virtual_hosts(ing, [HOST], {})
    assert vh.tls is True
    assert vh.cert_id is None
    (warning,) = warnings
    assert "ns/a-tls" in warning
    assert HOST in warning
    assert "not found" in warning
    assert decode_host(encode_host(vh))[0] == "!"


def test_tls_with_an_invalid_secret_names_the_reason() -> None:
    ing = make_ingress([("/", "Prefix", "s")], tls=TLS)
    (vh,), warnings = virtual_hosts(ing, [HOST], {"a-tls": SecretState(None, "bad key")})
    assert (vh.tls, vh.cert_id) == (True, None)
    assert "bad key" in warnings[0]


def test_ssl_redirect_false_turns_the_redirect_off() -> None:
    ing = make_ingress(
        [("/", "Prefix", "s")], tls=TLS, annotations={"nginx.org/ssl-redirect": "false"}
    )
    vh = vhost(ing, secrets={"a-tls": SecretState(CERT, None)})
    assert (vh.tls, vh.cert_id, vh.redirect_https) == (True, CERT, False)
    assert decode_host(encode_host(vh))[:2] == (CERT, False)


def test_ssl_redirect_true_is_the_default() -> None:
    ing = make_ingress(
        [("/", "Prefix", "s")], tls=TLS, annotations={"nginx.org/ssl-redirect": "True"}
    )
    assert vhost(ing, secrets={"a-tls": SecretState(CERT, None)}).redirect_https is True


def test_hosts_without_tls_get_neither_tls_nor_redirect() -> None:
    ing = make_ingress(
        [("/", "Prefix", "s")], tls=[{"hosts": ["b.example.com"], "secretName": "b"}]
    )
    vh = vhost(ing)
    assert (vh.tls, vh.cert_id, vh.redirect_https) == (False, None, False)
    assert decode_host(encode_host(vh))[:2] == ("-", False)


def test_tls_entry_without_hosts_warns() -> None:
    ing = make_ingress([("/", "Prefix", "s")], tls=[{"secretName": "orphan"}])
    (vh,), warnings = virtual_hosts(ing, [HOST], {})
    assert vh.tls is False
    assert any("orphan" in w and "no hosts" in w for w in warnings)


# ---- property: the router's tables select what Kubernetes would ---------------------

_SEGMENTS = ["a", "b", "ab", "a.b", "-"]
_segments = st.lists(st.sampled_from(_SEGMENTS), max_size=3)
_paths = st.builds(
    lambda segs, slash: "/" + "/".join(segs) + ("/" if slash and segs else ""),
    _segments,
    st.booleans(),
)
_rules = st.lists(
    st.tuples(_paths, st.sampled_from(["Exact", "Prefix", "ImplementationSpecific"])),
    min_size=1,
    max_size=6,
)
_requests = st.lists(
    st.builds(
        lambda segs, slash: "/" + "/".join(segs) + ("/" if slash and segs else ""),
        st.lists(st.sampled_from([*_SEGMENTS, "abc", "x"]), max_size=4),
        st.booleans(),
    ),
    min_size=1,
    max_size=8,
)


def kubernetes_pick(rules: list[tuple[str, str]], request: str) -> int | None:
    """Index of the rule the Ingress spec selects for ``request``, or None.

    Exact matches the path as written. Prefix (ImplementationSpecific is
    Prefix here) matches element-wise, its trailing slash ignored: ``/foo``
    matches ``/foo``, ``/foo/`` and ``/foo/bar``, never ``/foobar``. The
    longest match wins; Exact wins a tie; then the first rule.
    """
    req_elems = [e for e in request.split("/") if e]
    best: tuple[int, int, int] | None = None  # (-length, exact? 0 : 1, index)
    for i, (path, path_type) in enumerate(rules):
        if path_type == "Exact":
            if request != path:
                continue
            key = (-len(path), 0, i)
        else:
            elems = [e for e in path.split("/") if e]
            if req_elems[: len(elems)] != elems:
                continue
            key = (-len(path.rstrip("/")), 1, i)
        if best is None or key < best:
            best = key
    return None if best is None else best[2]


@settings(max_examples=300, deadline=None)
@given(rules=_rules, requests=_requests, with_default=st.booleans())
def test_router_tables_route_like_kubernetes(
    rules: list[tuple[str, str]], requests: list[str], with_default: bool
) -> None:
    # Each rule gets its own service so the selected backend names the rule.
    ing = make_ingress(
        [(p, t, f"rule{i}") for i, (p, t) in enumerate(rules)],
        default_backend="default" if with_default else None,
    )
    # What NGINX is told: the encoded host record, decoded as the Lua router does.
    _, _, default, exact, prefix = decode_host(encode_host(vhost(ing)))
    # Requests that only differ from a rule's path by a last character, too.
    requests = requests + [p + s for p, _ in rules for s in ("", "/", "x", "/x")]
    for request in (r for r in requests if "//" not in r):  # NGINX merges slashes
        picked = kubernetes_pick(rules, request)
        if picked is not None:
            want: str | None = f"ns/rule{picked}:80"
        else:
            want = "ns/default:web" if with_default else None
        assert match(exact, prefix, default, request) == want, request
