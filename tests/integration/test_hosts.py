"""Hosts, wildcards, default backends, catch-all rules and host ownership."""

from __future__ import annotations

import pytest

from testkit.harness import (
    Backends,
    Ferryman,
    backend,
    eventually,
    ingress,
    path,
    rule,
    served_by,
    service_with_backends,
)

pytestmark = pytest.mark.flavours("nginx", "nginx-1.30", "angie")


def _services(ferryman: Ferryman, backends: Backends, *names: str) -> None:
    for name in names:
        ferryman.write(f"svc-{name}", service_with_backends(name, [backends.start(name)]))


def test_exact_and_wildcard_hosts(ferryman: Ferryman, backends: Backends) -> None:
    _services(ferryman, backends, "wild", "exact")
    ferryman.write(
        "ing",
        ingress(
            "hosts",
            [
                rule("*.example.com", path("/", "wild")),
                rule("foo.example.com", path("/", "exact")),
            ],
        ),
    )
    ferryman.start()
    assert served_by(ferryman, "a.example.com", "/") == "wild"
    assert served_by(ferryman, "A.Example.COM", "/") == "wild"  # host names ignore case
    assert served_by(ferryman, "foo.example.com", "/") == "exact"
    assert served_by(ferryman, "b.a.example.com", "/") == "404"
    assert served_by(ferryman, "example.com", "/") == "404"
    assert served_by(ferryman, "a.example.com:8080", "/") == "wild"


def test_unknown_host_gets_404(ferryman: Ferryman, backends: Backends) -> None:
    _services(ferryman, backends, "a")
    ferryman.write("ing", ingress("one", [rule("one.example.com", path("/", "a"))]))
    ferryman.start()
    assert served_by(ferryman, "other.example.com", "/") == "404"
    assert served_by(ferryman, "one.example.com", "/") == "a"


def test_default_backend_serves_unmatched_paths_of_its_hosts(
    ferryman: Ferryman, backends: Backends
) -> None:
    _services(ferryman, backends, "a", "fallback")
    ferryman.write(
        "ing",
        ingress(
            "withdefault",
            [rule("d.example.com", path("/a", "a"))],
            default_backend=backend("fallback"),
        ),
    )
    ferryman.start()
    assert served_by(ferryman, "d.example.com", "/a/x") == "a"
    assert served_by(ferryman, "d.example.com", "/zzz") == "fallback"
    assert served_by(ferryman, "other.example.com", "/zzz") == "404"


def test_default_backend_only_ingress_serves_every_host(
    ferryman: Ferryman, backends: Backends
) -> None:
    _services(ferryman, backends, "fallback", "a")
    ferryman.write("default", ingress("catchall", default_backend=backend("fallback")))
    ferryman.write("ing", ingress("named", [rule("n.example.com", path("/", "a"))]))
    ferryman.start()
    assert served_by(ferryman, "anything.example.org", "/x") == "fallback"
    assert served_by(ferryman, "n.example.com", "/x") == "a"


def test_hostless_rule_applies_to_all_hosts(ferryman: Ferryman, backends: Backends) -> None:
    _services(ferryman, backends, "any")
    ferryman.write("ing", ingress("nohost", [rule(None, path("/any", "any"))]))
    ferryman.start()
    assert served_by(ferryman, "whatever.test", "/any") == "any"
    assert served_by(ferryman, "whatever.test", "/other") == "404"


def test_oldest_ingress_owns_a_contested_host(ferryman: Ferryman, backends: Backends) -> None:
    _services(ferryman, backends, "old", "new")
    host = "contested.example.com"
    ferryman.write(
        "new",
        ingress("newer", [rule(host, path("/", "new"))], created="2024-05-01T00:00:00Z"),
    )
    ferryman.write(
        "old",
        ingress("older", [rule(host, path("/", "old"))], created="2024-01-01T00:00:00Z"),
    )
    ferryman.start()
    assert served_by(ferryman, host, "/") == "old"
    loser = ferryman.events_for("newer")
    assert loser and loser[-1]["reason"] == "Rejected"
    assert "taken by default/older" in loser[-1]["message"]

    ferryman.remove("old")
    eventually(lambda: served_by(ferryman, host, "/") == "new", 60, "handover to newer")
    eventually(lambda: ferryman.events_for("newer")[-1]["reason"] == "AddedOrUpdated", 60, "event")


def test_equal_timestamps_are_ordered_by_namespace_and_name(
    ferryman: Ferryman, backends: Backends
) -> None:
    _services(ferryman, backends, "a", "b")
    host = "tie.example.com"
    ts = "2024-01-01T00:00:00Z"
    ferryman.write("b", ingress("bbb", [rule(host, path("/", "b"))], created=ts))
    ferryman.write("a", ingress("aaa", [rule(host, path("/", "a"))], created=ts))
    ferryman.start()
    assert served_by(ferryman, host, "/") == "a"


def test_partly_contested_ingress_keeps_its_other_hosts(
    ferryman: Ferryman, backends: Backends
) -> None:
    _services(ferryman, backends, "first", "second")
    ferryman.write(
        "first",
        ingress(
            "first", [rule("x.example.com", path("/", "first"))], created="2024-01-01T00:00:00Z"
        ),
    )
    ferryman.write(
        "second",
        ingress(
            "second",
            [
                rule("x.example.com", path("/", "second")),
                rule("y.example.com", path("/", "second")),
            ],
            created="2024-02-01T00:00:00Z",
        ),
    )
    ferryman.start()
    assert served_by(ferryman, "x.example.com", "/") == "first"
    assert served_by(ferryman, "y.example.com", "/") == "second"
    ev = ferryman.events_for("second")[-1]
    assert ev["reason"] == "AddedOrUpdatedWithWarning"
    assert "x.example.com is taken by default/first" in ev["message"]
