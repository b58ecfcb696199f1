"""ingress-nginx's ssl-passthrough: the annotation read
(kinds/ingress/parse/ingress_nginx_passthrough.py) and the S records of the
hosts an Ingress owns (kinds/ingress/records/passthrough.py)."""

from __future__ import annotations

import pytest

from ferryman.kinds.ingress.parse.ingress import parse_ingress
from ferryman.kinds.ingress.parse.ingress_nginx import DIFFERS, entry
from ferryman.kinds.ingress.records.passthrough import NOTHING, passed_through
from ferryman.kinds.transport.parse.transportserver import parse_transport_server
from ferryman.kinds.transport.records.stream import passthrough_record, stream_record
from testkit.harness import backend, ingress, path, rule

P = "nginx.ingress.kubernetes.io/"
ON = {P + "ssl-passthrough": "true"}


@pytest.mark.parametrize(
    ("value", "passed", "warned"),
    [("true", True, False), ("True", True, False), ("1", True, False), ("false", False, False),
     ("yes", False, True), ("", False, True)],
)  # fmt: skip
def test_the_annotation_is_read_as_ingress_nginx_reads_a_bool(
    value: str, passed: bool, warned: bool
) -> None:
    ing = parse_ingress(
        ingress("a", [rule("a.test", path("/", "app"))], annotations={P + "ssl-passthrough": value})
    )
    assert ing.ssl_passthrough is passed
    said = [w for w in ing.warnings if "ssl-passthrough" in w]
    assert bool(said) is warned
    if warned:
        assert "is not true or false: not applied (TLS is ended here)" in said[0]
    e = entry("ssl-passthrough")
    assert e is not None and e.status == DIFFERS


def test_each_owned_host_passes_to_its_root_path_backend() -> None:
    """The rule's / path (any other path ignored), else the defaultBackend; a
    host the Ingress does not own writes nothing."""
    ing = parse_ingress(
        ingress(
            "a",
            [
                rule("a.test", path("/api", "api"), path("/", "app", port="https")),
                rule("b.test", path("/only", "only")),
                rule("c.test", path("/", "c", port=8443)),
            ],
            default_backend=backend("fallback", 443),
            annotations=ON,
        )
    )
    out = passed_through(ing, ("a.test", "b.test"), enabled=True)
    assert out.records == {
        "tls-passthrough/a.test": passthrough_record("default/app:https"),
        "tls-passthrough/b.test": passthrough_record("default/fallback:443"),
    }
    assert out.backends == {"default/app:https", "default/fallback:443"}
    assert out.warnings == ()


def test_what_cannot_be_passed_through_is_said() -> None:
    """Without the flag, ingress-nginx ignores the annotation: so does ferryman,
    naming the flag. A host with no / path nor defaultBackend, and a host-less
    rule, have no backend or SNI name to pass to."""
    rules = [
        rule("a.test", path("/x", "x")),
        rule("*.w.test", path("/", "w")),
        rule(None, path("/", "any")),
    ]
    ing = parse_ingress(ingress("a", rules, annotations=ON))
    off = passed_through(ing, ("a.test",), enabled=False)
    assert off.records == {} and "needs --enable-ssl-passthrough" in off.warnings[0]
    out = passed_through(ing, ing.hosts(), enabled=True)
    # A wildcard is served as a passthrough TransportServer's (one label deeper).
    assert out.records == {"tls-passthrough/*.w.test": passthrough_record("default/w:80")}
    assert [w.split(": ", 1)[1] for w in out.warnings] == [
        "a rule without a host has no SNI name to route by: its TLS is ended here",
        "host a.test has neither a / path nor a defaultBackend to pass its connections to: "
        "its TLS is ended here, as ingress-nginx does",
    ]
    plain = parse_ingress(ingress("p", [rule("a.test", path("/", "app"))]))
    assert passed_through(plain, ("a.test",), enabled=True) is NOTHING
    assert passed_through(None, (), enabled=True) is NOTHING


def test_server_alias_names_are_not_passed_through() -> None:
    ing = parse_ingress(
        ingress(
            "a",
            [rule("a.test", path("/", "app"))],
            annotations={**ON, P + "server-alias": "alias.test"},
        )
    )
    assert set(ing.hosts()) == {"a.test", "alias.test"}
    out = passed_through(ing, ing.hosts(), enabled=True)
    assert set(out.records) == {"tls-passthrough/a.test"}


def test_the_record_is_a_default_transport_servers() -> None:
    """The same balancing a passthrough TransportServer with NIC's defaults gets."""
    ts = parse_transport_server(
        {
            "apiVersion": "k8s.nginx.org/v1",
            "kind": "TransportServer",
            "metadata": {"name": "t", "namespace": "default"},
            "spec": {
                "listener": {"name": "tls-passthrough", "protocol": "TLS_PASSTHROUGH"},
                "host": "a.test",
                "upstreams": [{"name": "u", "service": "app", "port": 443}],
                "action": {"pass": "u"},
            },
        }
    ).resource
    assert ts is not None
    assert passthrough_record("default/app:443") == stream_record(ts)
