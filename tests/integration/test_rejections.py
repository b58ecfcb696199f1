"""Bad input is rejected with a precise reason and never takes other traffic down."""

from __future__ import annotations

from typing import Any

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

HOSTILE_PATHS = [
    ("/a;return 200 pwned", "';'"),
    ("/a{", "'{'"),
    ("/a}", "'}'"),
    ('/a"b', "'\"'"),
    ("/a'b", '"\'"'),
    ("/a\nb", "'\\n'"),
    ("/$host", "'$'"),
    ("/a b", "' '"),
    ("/a\\b", "'\\\\'"),
    ("relative", "absolute path"),
    ("/a//b", "'//'"),
    ("/a/../b", "'/../'"),
]


def _good(ferryman: Ferryman, backends: Backends) -> None:
    ferryman.write("svc", service_with_backends("app", [backends.start("app")]))
    ferryman.write("good", ingress("good", [rule("good.test", path("/", "app"))]))


def _rejected_message(ferryman: Ferryman, name: str) -> str:
    # Events are written once the change is live: the traffic may show it first.
    eventually(
        lambda: ferryman.events_for(name)[-1]["reason"] == "Rejected", 60, f"{name} rejected"
    )
    events = ferryman.events_for(name)
    assert events[-1]["type"] == "Warning"
    return events[-1]["message"]


@pytest.mark.parametrize(("bad_path", "mention"), HOSTILE_PATHS)
def test_hostile_paths_are_rejected(
    ferryman: Ferryman, backends: Backends, bad_path: str, mention: str
) -> None:
    _good(ferryman, backends)
    ferryman.write("bad", ingress("bad", [rule("bad.test", path(bad_path, "app"))]))
    ferryman.start()
    message = _rejected_message(ferryman, "bad")
    assert "spec.rules[0].http.paths[0].path" in message
    assert mention in message
    assert served_by(ferryman, "good.test", "/") == "app"
    assert served_by(ferryman, "bad.test", "/") == "404"
    assert ferryman.metrics()["nginx_ingress_controller_nginx_reload_errors_total"] == 0


@pytest.mark.parametrize(
    ("spec", "field", "mention"),
    [
        ({"rules": [rule("Bad_Host.test", path("/", "app"))]}, "spec.rules[0].host", "lower case"),
        ({"rules": [rule("a.*.test", path("/", "app"))]}, "spec.rules[0].host", "wildcard"),
        ({"rules": [rule("10.0.0.1", path("/", "app"))]}, "spec.rules[0].host", "IP address"),
        ({"rules": [rule("x;y.test", path("/", "app"))]}, "spec.rules[0].host", "lower case"),
        (
            {"rules": [rule("p.test", path("/", "app", port=70000))]},
            "service.port.number",
            "between 1 and 65535",
        ),
        (
            {"rules": [rule("p.test", path("/", "app", port="Bad;Name"))]},
            "service.port.name",
            "lower case",
        ),
        (
            {"rules": [rule("p.test", path("/", "App$"))]},
            "service.name",
            "lower case",
        ),
        (
            {
                "rules": [
                    rule(
                        "p.test",
                        {
                            "path": "/",
                            "pathType": "Prefix",
                            "backend": {"resource": {"kind": "Bucket", "name": "b"}},
                        },
                    )
                ]
            },
            "backend.resource",
            "not supported",
        ),
        (
            {"rules": [rule("p.test", {"path": "/", "backend": backend("app")})]},
            "pathType",
            "one of",
        ),
        ({}, "spec", "either defaultBackend or rules"),
    ],
)
def test_invalid_fields_are_rejected_with_the_field_named(
    ferryman: Ferryman, backends: Backends, spec: dict[str, Any], field: str, mention: str
) -> None:
    _good(ferryman, backends)
    doc = ingress("bad", None)
    doc["spec"].update(spec)
    ferryman.write("bad", doc)
    ferryman.start()
    message = _rejected_message(ferryman, "bad")
    assert field in message
    assert mention in message
    assert served_by(ferryman, "good.test", "/") == "app"
    assert ferryman.metrics()["nginx_ingress_controller_nginx_reload_errors_total"] == 0


def test_valid_ingress_turning_invalid_is_removed_and_others_keep_serving(
    ferryman: Ferryman, backends: Backends
) -> None:
    _good(ferryman, backends)
    ferryman.write("other", ingress("other", [rule("other.test", path("/", "app"))]))
    ferryman.start()
    assert served_by(ferryman, "other.test", "/") == "app"
    ferryman.write("other", ingress("other", [rule("other.test", path("/{x}", "app"))]))
    eventually(lambda: served_by(ferryman, "other.test", "/") == "404", 60, "removal")
    assert "'{'" in _rejected_message(ferryman, "other")
    assert served_by(ferryman, "good.test", "/") == "app"


def test_manifest_without_name_is_reported_with_its_file(
    ferryman: Ferryman, backends: Backends
) -> None:
    _good(ferryman, backends)
    ferryman.write_text("noname.yaml", "apiVersion: v1\nkind: Service\nmetadata: {}\n")
    ferryman.write_text("scalar.yaml", "just a string\n")
    ferryman.start()
    logs = ferryman.logs()
    assert "noname.yaml (document 1)" in logs
    assert "metadata.name is required" in logs
    assert "scalar.yaml (document 1)" in logs
    assert served_by(ferryman, "good.test", "/") == "app"
