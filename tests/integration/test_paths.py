"""Ingress path semantics, as the Kubernetes documentation defines them, through
the data plane (NGINX and Angie)."""

from __future__ import annotations

import pytest

from testkit.harness import (
    Backends,
    Ferryman,
    eventually,
    ingress,
    path,
    rule,
    served_by,
    service_with_backends,
)

pytestmark = pytest.mark.flavours("nginx", "nginx-1.30", "angie")

HOST = "paths.example.com"


def _serve(ferryman: Ferryman, backends: Backends, *paths: dict[str, object]) -> None:
    services = sorted({p["backend"]["service"]["name"] for p in paths})  # type: ignore[index]
    for name in services:
        ferryman.write(f"svc-{name}", service_with_backends(name, [backends.start(name)]))
    ferryman.write("ing", ingress("paths", [rule(HOST, *paths)]))
    ferryman.start()


def test_exact_matches_only_the_exact_path(ferryman: Ferryman, backends: Backends) -> None:
    _serve(ferryman, backends, path("/foo", "a", "Exact"))
    assert served_by(ferryman, HOST, "/foo") == "a"
    assert served_by(ferryman, HOST, "/foo/") == "404"
    assert served_by(ferryman, HOST, "/foo/bar") == "404"
    assert served_by(ferryman, HOST, "/fo") == "404"


def test_exact_path_with_a_slash_leaves_the_bare_path_to_the_other_rules(
    ferryman: Ferryman, backends: Backends
) -> None:
    """Angie (as NGINX) redirects ``/foo`` to ``/foo/`` when a proxying location is
    named ``/foo/``; Kubernetes gives ``/foo`` whatever the other rules give it."""
    _serve(ferryman, backends, path("/foo/", "a", "Exact"), path("/", "root"))
    assert served_by(ferryman, HOST, "/foo/") == "a"
    assert served_by(ferryman, HOST, "/foo") == "root"
    ferryman.write("ing", ingress("paths", [rule(HOST, path("/foo/", "a", "Exact"))]))
    eventually(lambda: served_by(ferryman, HOST, "/") == "404", 60, "Prefix / gone")
    assert served_by(ferryman, HOST, "/foo") == "404"
    assert served_by(ferryman, HOST, "/foo/") == "a"


def test_prefix_matches_element_wise(ferryman: Ferryman, backends: Backends) -> None:
    _serve(ferryman, backends, path("/foo", "a"))
    for p in ("/foo", "/foo/", "/foo/bar", "/foo/bar/baz?q=1"):
        assert served_by(ferryman, HOST, p) == "a", p
    for p in ("/foobar", "/fo", "/", "/bar/foo"):
        assert served_by(ferryman, HOST, p) == "404", p


def test_prefix_trailing_slash_on_the_rule_is_ignored(
    ferryman: Ferryman, backends: Backends
) -> None:
    _serve(ferryman, backends, path("/foo/", "a"))
    assert served_by(ferryman, HOST, "/foo") == "a"
    assert served_by(ferryman, HOST, "/foo/x") == "a"
    assert served_by(ferryman, HOST, "/foox") == "404"


def test_implementation_specific_behaves_as_prefix(ferryman: Ferryman, backends: Backends) -> None:
    _serve(ferryman, backends, path("/foo", "a", "ImplementationSpecific"))
    assert served_by(ferryman, HOST, "/foo") == "a"
    assert served_by(ferryman, HOST, "/foo/bar") == "a"
    assert served_by(ferryman, HOST, "/foobar") == "404"


def test_paths_are_case_sensitive(ferryman: Ferryman, backends: Backends) -> None:
    _serve(ferryman, backends, path("/foo", "a"), path("/Bar", "b", "Exact"))
    assert served_by(ferryman, HOST, "/FOO") == "404"
    assert served_by(ferryman, HOST, "/Foo/x") == "404"
    assert served_by(ferryman, HOST, "/Bar") == "b"
    assert served_by(ferryman, HOST, "/bar") == "404"


def test_longest_prefix_wins(ferryman: Ferryman, backends: Backends) -> None:
    _serve(ferryman, backends, path("/", "root"), path("/foo", "foo"), path("/foo/bar", "bar"))
    assert served_by(ferryman, HOST, "/") == "root"
    assert served_by(ferryman, HOST, "/x") == "root"
    assert served_by(ferryman, HOST, "/foobar") == "root"
    assert served_by(ferryman, HOST, "/foo/x") == "foo"
    assert served_by(ferryman, HOST, "/foo/barbaz") == "foo"
    assert served_by(ferryman, HOST, "/foo/bar") == "bar"
    assert served_by(ferryman, HOST, "/foo/bar/baz") == "bar"


def test_exact_beats_prefix_on_a_tie(ferryman: Ferryman, backends: Backends) -> None:
    _serve(ferryman, backends, path("/foo", "prefix"), path("/foo", "exact", "Exact"))
    assert served_by(ferryman, HOST, "/foo") == "exact"
    assert served_by(ferryman, HOST, "/foo/") == "prefix"
    assert served_by(ferryman, HOST, "/foo/x") == "prefix"


def test_rules_for_one_host_are_merged(ferryman: Ferryman, backends: Backends) -> None:
    for name in ("a", "b"):
        ferryman.write(f"svc-{name}", service_with_backends(name, [backends.start(name)]))
    ferryman.write(
        "ing",
        ingress("merged", [rule(HOST, path("/a", "a")), rule(HOST, path("/b", "b"))]),
    )
    ferryman.start()
    assert served_by(ferryman, HOST, "/a") == "a"
    assert served_by(ferryman, HOST, "/b/x") == "b"
