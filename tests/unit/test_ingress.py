"""ferryman.kinds.ingress.parse.ingress.parse_ingress: what is accepted, and why not."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from ferryman.kinds.ingress.parse.ingress import (
    MAX_PATH_LENGTH,
    MAX_PATHS,
    MAX_RULES,
    Balancing,
    Ingress,
    ServiceBackend,
    parse_ingress,
)
from ferryman.resources.meta import InvalidResource


def backend(name: str = "svc", number: int | None = 80, port_name: str | None = None) -> dict:
    port: dict[str, Any] = {}
    if number is not None:
        port["number"] = number
    if port_name is not None:
        port["name"] = port_name
    return {"service": {"name": name, "port": port}}


def raw_ingress() -> dict[str, Any]:
    """A valid Ingress with two rules, two paths in the first, and one TLS entry."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "ingressClassName": "ferryman",
            "tls": [{"hosts": ["a.example.com"], "secretName": "a-tls"}],
            "rules": [
                {
                    "host": "a.example.com",
                    "http": {
                        "paths": [
                            {"path": "/", "pathType": "Prefix", "backend": backend()},
                            {"path": "/api", "pathType": "Exact", "backend": backend("api")},
                        ]
                    },
                },
                {
                    "host": "*.b.example.com",
                    "http": {
                        "paths": [
                            {
                                "path": "/x",
                                "pathType": "ImplementationSpecific",
                                "backend": backend("x", None, "http"),
                            }
                        ]
                    },
                },
            ],
        },
    }


def errors_of(obj: dict[str, Any]) -> list[str]:
    with pytest.raises(InvalidResource) as info:
        parse_ingress(obj)
    assert info.value.errors, "InvalidResource without reasons"
    return info.value.errors


def test_valid_ingress() -> None:
    ing = parse_ingress(raw_ingress())
    assert ing.meta.name == "web"
    assert ing.meta.namespace == "shop"
    assert ing.class_name == "ferryman"
    assert ing.hosts() == ("a.example.com", "*.b.example.com")
    assert [(p.path, p.path_type, p.backend) for p in ing.rules[0].paths] == [
        ("/", "Prefix", ServiceBackend("svc", 80)),
        ("/api", "Exact", ServiceBackend("api", 80)),
    ]
    assert ing.rules[1].paths[0].backend == ServiceBackend("x", "http")
    assert ing.tls[0].hosts == ("a.example.com",)
    assert ing.tls[0].secret_name == "a-tls"
    assert ing.default_backend is None
    assert ing.services() == {
        ServiceBackend("svc", 80),
        ServiceBackend("api", 80),
        ServiceBackend("x", "http"),
    }


def _set(path: str, value: object) -> Callable[[dict[str, Any]], None]:
    """A mutator that sets ``value`` at a dotted path ("spec.rules.0.host")."""

    def mutate(obj: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = obj
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        if value is _DELETE:
            del node[int(last) if last.isdigit() else last]
        elif last.isdigit():
            node[int(last)] = value
        else:
            node[last] = value

    return mutate


_DELETE = object()
P1 = "spec.rules.0.http.paths.1"
B1 = f"{P1}.backend"
MAX_FAILS = "nginx.org/max-fails"
FAIL_TIMEOUT = "nginx.org/fail-timeout"


def _annotation(key: str, value: str) -> Callable[[dict[str, Any]], None]:
    return _set("metadata.annotations", {key: value})


def _path(path: str) -> dict[str, Any]:
    return {"path": path, "pathType": "Prefix", "backend": backend()}


@pytest.mark.parametrize(
    "mutate, field",
    [
        (_set(f"{P1}.path", "/a;b"), "spec.rules[0].http.paths[1].path"),
        (_set(f"{P1}.path", "/a//b"), "spec.rules[0].http.paths[1].path"),
        (_set(f"{P1}.path", "api"), "spec.rules[0].http.paths[1].path"),
        (_set(f"{P1}.path", "/a b"), "spec.rules[0].http.paths[1].path"),
        (_set(f"{P1}.path", _DELETE), "spec.rules[0].http.paths[1].path"),
        (_set(f"{P1}.path", 7), "spec.rules[0].http.paths[1].path"),
        (_set(f"{P1}.pathType", "Regex"), "spec.rules[0].http.paths[1].pathType"),
        (_set(f"{P1}.pathType", _DELETE), "spec.rules[0].http.paths[1].pathType"),
        (_set(P1, "oops"), "spec.rules[0].http.paths[1]"),
        (_set(B1, _DELETE), "spec.rules[0].http.paths[1].backend"),
        (_set(f"{B1}.service", _DELETE), "spec.rules[0].http.paths[1].backend.service"),
        (_set(f"{B1}.service.name", "Api"), "spec.rules[0].http.paths[1].backend.service.name"),
        (_set(f"{B1}.service.name", "1api"), "spec.rules[0].http.paths[1].backend.service.name"),
        (
            _set(f"{B1}.service.name", _DELETE),
            "spec.rules[0].http.paths[1].backend.service.name",
        ),
        (_set(f"{B1}.service.port", _DELETE), "spec.rules[0].http.paths[1].backend.service.port"),
        (_set(f"{B1}.service.port", {}), "spec.rules[0].http.paths[1].backend.service.port"),
        (
            _set(f"{B1}.service.port", {"number": 80, "name": "http"}),
            "spec.rules[0].http.paths[1].backend.service.port",
        ),
        (
            _set(f"{B1}.service.port.number", 0),
            "spec.rules[0].http.paths[1].backend.service.port.number",
        ),
        (
            _set(f"{B1}.service.port.number", 65536),
            "spec.rules[0].http.paths[1].backend.service.port.number",
        ),
        (
            _set(f"{B1}.service.port.number", "80"),
            "spec.rules[0].http.paths[1].backend.service.port.number",
        ),
        (
            _set(f"{B1}.service.port", {"name": "HTTP"}),
            "spec.rules[0].http.paths[1].backend.service.port.name",
        ),
        (
            _set(f"{B1}.service.port", {"name": "a--b"}),
            "spec.rules[0].http.paths[1].backend.service.port.name",
        ),
        (
            _set(B1, {"resource": {"apiGroup": "k8s.example.com", "kind": "B", "name": "b"}}),
            "spec.rules[0].http.paths[1].backend.resource",
        ),
        (_set("spec.rules.0.http.paths", []), "spec.rules[0].http.paths"),
        (_set("spec.rules.0.http", {}), "spec.rules[0].http.paths"),
        (_set("spec.rules.0.host", "A.example.com"), "spec.rules[0].host"),
        (_set("spec.rules.1.host", "b.*.example.com"), "spec.rules[1].host"),
        (_set("spec.rules.1.host", "10.0.0.1"), "spec.rules[1].host"),
        (_set("spec.rules.1.host", 5), "spec.rules[1].host"),
        (_set("spec.rules.1", "oops"), "spec.rules[1]"),
        (_set("spec.rules", "oops"), "spec.rules"),
        (_set("spec.tls.0.hosts", ["a.example.com", "bad host"]), "spec.tls[0].hosts"),
        (_set("spec.tls.0.hosts", "a.example.com"), "spec.tls[0].hosts"),
        (_set("spec.tls.0.secretName", "Bad_Name"), "spec.tls[0].secretName"),
        (_set("spec.tls.0.secretName", 7), "spec.tls[0].secretName"),
        (_set("spec.tls", "oops"), "spec.tls"),
        (
            _set("spec.defaultBackend", {"resource": {"kind": "B", "name": "b"}}),
            "spec.defaultBackend.resource",
        ),
        (
            _set("spec.defaultBackend", backend(number=99999)),
            "spec.defaultBackend.service.port.number",
        ),
        (_set("metadata.name", "Web"), "metadata.name"),
        (_set("metadata.name", "web;"), "metadata.name"),
        (_set("metadata.namespace", "Shop"), "metadata.namespace"),
        (_set("metadata.name", _DELETE), "metadata.name"),
        (_set("spec", _DELETE), "spec"),
        # Annotation and label values are strings, as the API server insists.
        (
            _set("metadata.annotations", {"nginx.org/ssl-redirect": False}),
            "metadata.annotations[nginx.org/ssl-redirect]",
        ),
        (_set("metadata.annotations", ["a"]), "metadata.annotations"),
        (_set("metadata.labels", {"app": ["web"]}), "metadata.labels[app]"),
        (_set("metadata.labels", {1: "web"}), "metadata.labels"),
        (_set("metadata.namespace", ["shop"]), "metadata.namespace"),
        (_set("metadata.uid", {"a": 1}), "metadata.uid"),
        # Before the calendar starts once converted to UTC.
        (
            _set("metadata.creationTimestamp", "0001-01-01T00:00:00+05:00"),
            "metadata.creationTimestamp",
        ),
        (_set("metadata.creationTimestamp", [2024]), "metadata.creationTimestamp"),
        (_set("spec.ingressClassName", 5), "spec.ingressClassName"),
        (_set("spec.rules.1.host", 0), "spec.rules[1].host"),
        (_set("spec.rules.1.host", False), "spec.rules[1].host"),
        # Numbers are ASCII digits: "²" passes str.isdigit() and fails int();
        # int() reads "٣" (Arabic-Indic three) as 3. NIC's field names.
        (_annotation(MAX_FAILS, "²"), f"annotations.{MAX_FAILS}"),
        (_annotation(MAX_FAILS, "٣"), f"annotations.{MAX_FAILS}"),
        (_annotation(MAX_FAILS, "1" * 30), f"annotations.{MAX_FAILS}"),
        (_annotation(FAIL_TIMEOUT, "٣s"), f"annotations.{FAIL_TIMEOUT}"),
        (_annotation(FAIL_TIMEOUT, "1²s"), f"annotations.{FAIL_TIMEOUT}"),
        # Caps (see the constants in kinds/ingress/parse/ingress.py).
        (_set(f"{P1}.path", "/" + "a" * MAX_PATH_LENGTH), "spec.rules[0].http.paths[1].path"),
        (
            _set("spec.rules.0.http.paths", [_path(f"/p{i}") for i in range(MAX_PATHS + 1)]),
            "spec.rules",
        ),
        (
            _set("spec.rules", [{"host": f"h{i}.example.com"} for i in range(MAX_RULES + 1)]),
            "spec.rules",
        ),
    ],
)
def test_every_rejection_names_the_field(
    mutate: Callable[[dict[str, Any]], None], field: str
) -> None:
    obj = copy.deepcopy(raw_ingress())
    mutate(obj)
    errors = errors_of(obj)
    assert any(e.startswith(field + ":") for e in errors), errors


def test_every_problem_is_reported_not_just_the_first() -> None:
    obj = raw_ingress()
    obj["spec"]["rules"][0]["http"]["paths"][0]["path"] = "/a;"
    obj["spec"]["rules"][0]["http"]["paths"][1]["path"] = "/b{"
    obj["spec"]["rules"][1]["host"] = "B.example.com"
    errors = errors_of(obj)
    assert [e.split(":")[0] for e in errors] == [
        "spec.rules[0].http.paths[0].path",
        "spec.rules[0].http.paths[1].path",
        "spec.rules[1].host",
    ]
    # The message quotes the offending value.
    assert "'/a;'" in errors[0]


def test_resource_backend_is_rejected_with_a_hint() -> None:
    obj = raw_ingress()
    obj["spec"]["rules"][0]["http"]["paths"][0]["backend"] = {
        "resource": {"apiGroup": "k8s.example.com", "kind": "StorageBucket", "name": "b"}
    }
    (error,) = errors_of(obj)
    assert error.startswith("spec.rules[0].http.paths[0].backend.resource:")
    assert "service backend" in error


def test_port_number_and_port_name() -> None:
    obj = raw_ingress()
    paths = obj["spec"]["rules"][0]["http"]["paths"]
    paths[0]["backend"] = backend("svc", 8080)
    paths[1]["backend"] = backend("svc", None, "web")
    ing = parse_ingress(obj)
    by_number, by_name = (p.backend for p in ing.rules[0].paths)
    assert by_number == ServiceBackend("svc", 8080)
    assert by_number.port_ref == "8080"
    assert by_name == ServiceBackend("svc", "web")
    assert by_name.port_ref == "web"


def default_backend_only() -> dict[str, Any]:
    return {
        "kind": "Ingress",
        "metadata": {"name": "fallback", "namespace": "default"},
        "spec": {"ingressClassName": "ferryman", "defaultBackend": backend("catch", 8080)},
    }


def test_default_backend_only_ingress_claims_the_catch_all_host() -> None:
    ing = parse_ingress(default_backend_only())
    assert ing.rules == ()
    assert ing.default_backend == ServiceBackend("catch", 8080)
    assert ing.hosts() == ("",)
    assert ing.services() == {ServiceBackend("catch", 8080)}


def test_default_backend_with_rules_does_not_claim_the_catch_all() -> None:
    obj = raw_ingress()
    obj["spec"]["defaultBackend"] = backend("catch", 8080)
    ing = parse_ingress(obj)
    assert "" not in ing.hosts()
    assert ServiceBackend("catch", 8080) in ing.services()


def test_neither_rules_nor_default_backend_is_rejected() -> None:
    obj = default_backend_only()
    del obj["spec"]["defaultBackend"]
    assert errors_of(obj) == ["spec: either defaultBackend or rules must be specified"]


def test_hostless_rule_is_the_catch_all() -> None:
    obj = raw_ingress()
    del obj["spec"]["rules"][1]["host"]
    assert parse_ingress(obj).hosts() == ("a.example.com", "")


def test_hosts_are_deduplicated_in_rule_order() -> None:
    obj = raw_ingress()
    obj["spec"]["rules"].append(copy.deepcopy(obj["spec"]["rules"][0]))
    assert parse_ingress(obj).hosts() == ("a.example.com", "*.b.example.com")


def test_rule_without_http_is_accepted_with_no_paths() -> None:
    obj = raw_ingress()
    del obj["spec"]["rules"][1]["http"]
    assert parse_ingress(obj).rules[1].paths == ()


def test_implementation_specific_without_path_means_slash() -> None:
    obj = raw_ingress()
    del obj["spec"]["rules"][1]["http"]["paths"][0]["path"]
    assert parse_ingress(obj).rules[1].paths[0].path == "/"


def test_implementation_specific_with_empty_path_means_slash() -> None:
    # The API server accepts an empty path for ImplementationSpecific, and an
    # empty path is the same as none on the wire (the field is omitempty).
    obj = raw_ingress()
    obj["spec"]["rules"][1]["http"]["paths"][0]["path"] = ""
    assert parse_ingress(obj).rules[1].paths[0].path == "/"


def test_legacy_class_annotation() -> None:
    obj = raw_ingress()
    del obj["spec"]["ingressClassName"]
    assert parse_ingress(obj).class_name is None
    obj["metadata"]["annotations"] = {"kubernetes.io/ingress.class": "legacy"}
    assert parse_ingress(obj).class_name == "legacy"
    obj["spec"]["ingressClassName"] = "modern"
    assert parse_ingress(obj).class_name == "modern"


@pytest.mark.parametrize(
    "annotations, redirect",
    [
        ({}, True),
        ({"nginx.org/ssl-redirect": "true"}, True),
        ({"nginx.org/ssl-redirect": "false"}, False),
        ({"nginx.org/ssl-redirect": "False"}, False),
    ],
)
def test_ssl_redirect_annotation(annotations: dict[str, object], redirect: bool) -> None:
    obj = raw_ingress()
    obj["metadata"]["annotations"] = annotations
    ing: Ingress = parse_ingress(obj)
    assert ing.ssl_redirect is redirect


def test_tls_with_wildcard_host_and_without_hosts() -> None:
    obj = raw_ingress()
    obj["spec"]["tls"] = [
        {"hosts": ["*.b.example.com"], "secretName": "wild"},
        {"secretName": "nohosts"},
    ]
    ing = parse_ingress(obj)
    assert [(t.hosts, t.secret_name) for t in ing.tls] == [
        (("*.b.example.com",), "wild"),
        ((), "nohosts"),
    ]


@pytest.mark.parametrize(
    ("fail_timeout", "encoded"),
    [(10.0, "rr:1:10"), (1.5, "rr:1:1.5"), (0.001, "rr:1:0.001"), (3600 * 300, "rr:1:1080000")],
)
def test_balancing_encodes_fail_timeout_in_fixed_point(fail_timeout: float, encoded: str) -> None:
    """The NGINX routers parse digits and a dot: no exponent, even for long timeouts."""
    assert Balancing("rr", 1, fail_timeout).encode() == encoded


def test_limits_are_inclusive() -> None:
    obj = raw_ingress()
    long_path = "/" + "a" * (MAX_PATH_LENGTH - 1)
    paths = [_path(long_path)] + [_path(f"/p{i}") for i in range(MAX_PATHS - 1)]
    obj["spec"]["rules"] = [{"host": "a.example.com", "http": {"paths": paths}}] + [
        {"host": f"h{i}.example.com"} for i in range(MAX_RULES - 1)
    ]
    ing = parse_ingress(obj)
    assert len(ing.rules) == MAX_RULES
    assert ing.rules[0].paths[0].path == long_path
    assert len(ing.rules[0].paths) == MAX_PATHS


def test_the_caps_name_field_and_limit() -> None:
    obj = raw_ingress()
    obj["spec"]["rules"][0]["http"]["paths"][0]["path"] = "/" + "a" * MAX_PATH_LENGTH
    assert errors_of(obj) == [
        f"spec.rules[0].http.paths[0].path: {MAX_PATH_LENGTH + 1} characters long; "
        f"at most {MAX_PATH_LENGTH} are allowed"
    ]
    obj["spec"]["rules"][0]["http"]["paths"] = [_path(f"/{i}") for i in range(MAX_PATHS + 1)]
    assert errors_of(obj) == [
        f"spec.rules: {MAX_PATHS + 2} paths in all; at most {MAX_PATHS} are allowed"
    ]


@pytest.mark.parametrize(
    ("annotations", "balancing"),
    [
        ({}, Balancing("rr", 1, 10.0)),
        ({MAX_FAILS: "0", FAIL_TIMEOUT: "30s"}, Balancing("rr", 0, 30.0)),
        ({MAX_FAILS: "999999", FAIL_TIMEOUT: "500ms"}, Balancing("rr", 999999, 0.5)),
        ({"nginx.org/lb-method": "least_conn", FAIL_TIMEOUT: "2h"}, Balancing("lc", 1, 7200.0)),
        ({FAIL_TIMEOUT: "999999999"}, Balancing("rr", 1, 999999999.0)),
    ],
)
def test_balancing_annotations(annotations: dict[str, str], balancing: Balancing) -> None:
    obj = raw_ingress()
    obj["metadata"]["annotations"] = annotations
    assert parse_ingress(obj).balancing == balancing


def test_a_tls_entry_without_secret_name_is_kept_for_the_wildcard_secret() -> None:
    """Kubernetes (and NIC) accept a tls entry naming no Secret: NIC's
    --wildcard-tls-secret serves it; without the flag its handshakes are
    rejected with NIC's warning (it was rejected whole before)."""
    from ferryman.configs.secret_state import SecretState
    from ferryman.kinds.ingress.records.virtual_hosts import WILDCARD, virtual_hosts

    obj = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "tls": [{"hosts": ["a.example.com"]}],
            "rules": [{"host": "a.example.com"}],
        },
    }
    ing = parse_ingress(obj)
    assert ing.tls[0].secret_name == ""
    vhosts, warnings = virtual_hosts(ing, ["a.example.com"], {})
    assert vhosts[0].tls and vhosts[0].cert_id is None
    assert any("requires specifying a TLS secret" in w for w in warnings)
    states = {WILDCARD: SecretState("ops/wild@1", None)}
    vhosts, warnings = virtual_hosts(ing, ["a.example.com"], states)
    assert vhosts[0].cert_id == "ops/wild@1"
    assert not [w for w in warnings if "TLS" in w]
