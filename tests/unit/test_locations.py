"""ferryman.configs.ingress: Ingress paths -> NGINX locations, with Kubernetes semantics."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ferryman.configs.ingress import SecretState, secret_names, servers_for
from ferryman.configs.model import Location, Server, TLSConfig
from ferryman.resources.ingress import Ingress, parse_ingress

HOST = "a.example.com"


def make_ingress(
    paths: list[tuple[str, str, str]] | None = None,
    *,
    host: str = HOST,
    extra_rules: list[dict[str, Any]] | None = None,
    default_backend: str | None = None,
    tls: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
) -> Ingress:
    """``paths`` are (path, pathType, service); every backend uses port 80."""
    rules: list[dict[str, Any]] = []
    if paths is not None:
        rules.append(
            {
                "host": host,
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
        )
    rules += extra_rules or []
    spec: dict[str, Any] = {"rules": rules}
    if default_backend:
        spec["defaultBackend"] = {"service": {"name": default_backend, "port": {"name": "web"}}}
    if tls is not None:
        spec["tls"] = tls
    md = {"name": "ing", "namespace": "ns", "annotations": annotations or {}}
    return parse_ingress({"kind": "Ingress", "metadata": md, "spec": spec})


def server(ing: Ingress, host: str = HOST, secrets: dict[str, SecretState] | None = None) -> Server:
    (s,), _ = servers_for(ing, [host], secrets or {})
    return s


def locs(ing: Ingress, host: str = HOST) -> set[tuple[str, str | None]]:
    """Locations as ("= /p" or "/p/", backend service) pairs."""
    return {
        (("= " if loc.exact else "") + loc.path, loc.backend.split("/")[1] if loc.backend else None)
        for loc in server(ing, host).locations
    }


def k(service: str) -> str:
    return f"{service}:80"


def test_exact() -> None:
    assert locs(make_ingress([("/p", "Exact", "s")])) == {("= /p", k("s")), ("/", None)}


def test_prefix_matches_the_path_and_everything_below_it() -> None:
    assert locs(make_ingress([("/p", "Prefix", "s")])) == {
        ("= /p", k("s")),
        ("/p/", k("s")),
        ("/", None),
    }


def test_prefix_slash_is_the_root_location() -> None:
    assert locs(make_ingress([("/", "Prefix", "s")])) == {("/", k("s"))}


def test_trailing_slash_on_a_prefix_is_ignored() -> None:
    assert locs(make_ingress([("/p/", "Prefix", "s")])) == locs(
        make_ingress([("/p", "Prefix", "s")])
    )


def test_trailing_slash_on_exact_is_kept() -> None:
    assert ("= /p/", k("s")) in locs(make_ingress([("/p/", "Exact", "s")]))


def test_implementation_specific_is_prefix() -> None:
    assert locs(make_ingress([("/p", "ImplementationSpecific", "s")])) == locs(
        make_ingress([("/p", "Prefix", "s")])
    )


def test_exact_beats_prefix_on_the_same_path_in_either_order() -> None:
    for paths in (
        [("/p", "Prefix", "pre"), ("/p", "Exact", "ex")],
        [("/p", "Exact", "ex"), ("/p", "Prefix", "pre")],
    ):
        assert locs(make_ingress(paths)) == {
            ("= /p", k("ex")),
            ("/p/", k("pre")),
            ("/", None),
        }, paths


def test_first_rule_wins_on_duplicates() -> None:
    assert locs(make_ingress([("/p", "Prefix", "one"), ("/p/", "Prefix", "two")])) == {
        ("= /p", k("one")),
        ("/p/", k("one")),
        ("/", None),
    }
    assert locs(make_ingress([("/p", "Exact", "one"), ("/p", "Exact", "two")])) == {
        ("= /p", k("one")),
        ("/", None),
    }


def test_locations_are_unique_so_nginx_accepts_them() -> None:
    ing = make_ingress(
        [
            ("/p", "Prefix", "a"),
            ("/p/", "ImplementationSpecific", "b"),
            ("/p", "Exact", "c"),
            ("/", "Prefix", "d"),
            ("/", "Exact", "e"),
        ]
    )
    keys = [(loc.exact, loc.path) for loc in server(ing).locations]
    assert len(keys) == len(set(keys))


def test_fallback_is_404_without_a_default_backend() -> None:
    (root,) = [
        loc for loc in server(make_ingress([("/p", "Exact", "s")])).locations if loc.path == "/"
    ]
    assert root == Location(False, "/", None)


def test_fallback_is_the_default_backend() -> None:
    ing = make_ingress([("/p", "Exact", "s")], default_backend="catch")
    assert Location(False, "/", "ns/catch:web") in server(ing).locations


def test_prefix_slash_overrides_the_default_backend() -> None:
    ing = make_ingress([("/", "Prefix", "s")], default_backend="catch")
    assert [loc for loc in server(ing).locations if loc.path == "/"] == [
        Location(False, "/", "ns/s:80")
    ]


def test_backend_key_names_namespace_service_and_port() -> None:
    ing = make_ingress([("/p", "Exact", "s")])
    assert Location(True, "/p", "ns/s:80") in server(ing).locations


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
    assert locs(ing) == {("= /one", k("s1")), ("= /two", k("s2")), ("/", None)}
    assert locs(ing, "b.example.com") == {("= /three", k("s3")), ("/", None)}


def test_only_the_hosts_asked_for_get_servers() -> None:
    ing = make_ingress([("/", "Prefix", "s")])
    servers, _ = servers_for(ing, [], {})
    assert servers == []


def test_catch_all_server_for_a_default_backend_only_ingress() -> None:
    ing = make_ingress(None, default_backend="catch")
    s = server(ing, "")
    assert s.host == ""
    assert s.locations == (Location(False, "/", "ns/catch:web"),)
    assert s.tls is None


# ---- TLS ------------------------------------------------------------------------------

TLS = [{"hosts": [HOST], "secretName": "a-tls"}]


def test_tls_with_a_usable_secret() -> None:
    ing = make_ingress([("/", "Prefix", "s")], tls=TLS)
    servers, warnings = servers_for(ing, [HOST], {"a-tls": SecretState("/state/a.pem", None)})
    assert servers[0].tls == TLSConfig("/state/a.pem")
    assert servers[0].redirect_https is True
    assert warnings == []
    assert secret_names(ing) == {"a-tls"}


def test_tls_with_a_missing_secret_rejects_handshakes_and_warns() -> None:
    ing = make_ingress([("/", "Prefix", "s")], tls=TLS)
    servers, warnings = servers_for(ing, [HOST], {})
    assert servers[0].tls == TLSConfig(None)
    (warning,) = warnings
    assert "ns/a-tls" in warning
    assert HOST in warning
    assert "not found" in warning


def test_tls_with_an_invalid_secret_names_the_reason() -> None:
    ing = make_ingress([("/", "Prefix", "s")], tls=TLS)
    servers, warnings = servers_for(ing, [HOST], {"a-tls": SecretState(None, "bad key")})
    assert servers[0].tls == TLSConfig(None)
    assert "bad key" in warnings[0]


def test_ssl_redirect_false_turns_the_redirect_off() -> None:
    ing = make_ingress(
        [("/", "Prefix", "s")], tls=TLS, annotations={"nginx.org/ssl-redirect": "false"}
    )
    s = server(ing, secrets={"a-tls": SecretState("/state/a.pem", None)})
    assert s.tls == TLSConfig("/state/a.pem")
    assert s.redirect_https is False


def test_hosts_without_tls_get_neither_tls_nor_redirect() -> None:
    ing = make_ingress(
        [("/", "Prefix", "s")], tls=[{"hosts": ["b.example.com"], "secretName": "b"}]
    )
    s = server(ing)
    assert s.tls is None
    assert s.redirect_https is False


def test_tls_entry_without_hosts_warns() -> None:
    ing = make_ingress([("/", "Prefix", "s")], tls=[{"secretName": "orphan"}])
    servers, warnings = servers_for(ing, [HOST], {})
    assert servers[0].tls is None
    assert any("orphan" in w and "no hosts" in w for w in warnings)


# ---- property: the NGINX locations select what Kubernetes would ---------------------

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


def nginx_pick(locations: tuple[Location, ...], request: str) -> str | None:
    """NGINX: an ``=`` location equal to the URI, else the longest prefix location."""
    for loc in locations:
        if loc.exact and loc.path == request:
            return loc.backend
    prefixes = [loc for loc in locations if not loc.exact and request.startswith(loc.path)]
    assert prefixes, "every server must have a location /"
    return max(prefixes, key=lambda loc: len(loc.path)).backend


@settings(max_examples=300, deadline=None)
@given(rules=_rules, requests=_requests, with_default=st.booleans())
def test_nginx_locations_route_like_kubernetes(
    rules: list[tuple[str, str]], requests: list[str], with_default: bool
) -> None:
    # Each rule gets its own service so the selected backend names the rule.
    ing = make_ingress(
        [(p, t, f"rule{i}") for i, (p, t) in enumerate(rules)],
        default_backend="default" if with_default else None,
    )
    locations = server(ing).locations
    keys = [(loc.exact, loc.path) for loc in locations]
    assert len(keys) == len(set(keys)), "NGINX refuses duplicate locations"
    # Requests that only differ from a rule's path by a last character, too.
    requests = requests + [p + s for p, _ in rules for s in ("", "/", "x", "/x")]
    for request in (r for r in requests if "//" not in r):  # NGINX merges slashes
        picked = kubernetes_pick(rules, request)
        if picked is not None:
            want: str | None = f"ns/rule{picked}:80"
        else:
            want = "ns/default:web" if with_default else None
        assert nginx_pick(locations, request) == want, request
