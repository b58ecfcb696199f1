"""Every parser of user input, fed random shapes: the only failure is InvalidResource.

A parser that raises anything else (TypeError from a list where a map was
expected, ValueError from int("²"), UnsupportedAlgorithm from an odd curve)
escapes the per-resource rejection and leaves stale routes behind. Random
shapes test the first layers; mutations of valid objects reach the rest.
"""

from __future__ import annotations

import base64
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ferryman.kinds.ingress.parse.ingress import parse_ingress
from ferryman.kinds.ingress.parse.ingressclass import parse_ingress_class, raw_class_name
from ferryman.resources import validation
from ferryman.resources.meta import InvalidResource, parse_meta, ref_of
from ferryman.resources.secret import parse_tls_secret
from ferryman.resources.service import parse_endpoint_slice, parse_service, service_name_of
from ferryman.secrets import SecretStore
from ferryman.sources.manifests import parse_file
from testkit.strategies import mutations, yaml_scalars, yaml_values
from testkit.tls import cert_pem, key_pem, tls_secret

# Enough to find a shape no one thought of, few enough for CI (~1 s a test).
FUZZ = settings(max_examples=300, deadline=None)

Parser = Callable[[Mapping[str, Any]], object]

BACKEND = {"service": {"name": "web", "port": {"number": 80}}}
INGRESS = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "Ingress",
    "metadata": {
        "name": "web",
        "namespace": "shop",
        "creationTimestamp": "2024-01-02T03:04:05Z",
        "annotations": {
            "nginx.org/lb-method": "least_conn",
            "nginx.org/max-fails": "3",
            "nginx.org/fail-timeout": "10s",
            "nginx.org/ssl-redirect": "false",
        },
        "labels": {"app": "web"},
    },
    "spec": {
        "ingressClassName": "ferryman",
        "defaultBackend": BACKEND,
        "tls": [{"hosts": ["a.example.com"], "secretName": "a-tls"}],
        "rules": [
            {
                "host": "a.example.com",
                "http": {
                    "paths": [
                        {"path": "/", "pathType": "Prefix", "backend": BACKEND},
                        {
                            "path": "/api",
                            "pathType": "Exact",
                            "backend": {"service": {"name": "api", "port": {"name": "http"}}},
                        },
                    ]
                },
            },
            {
                "host": "*.b.example.com",
                "http": {"paths": [{"pathType": "Prefix", "path": "/b", "backend": BACKEND}]},
            },
        ],
    },
}
INGRESS_CLASS = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "IngressClass",
    "metadata": {
        "name": "ferryman",
        "annotations": {"ingressclass.kubernetes.io/is-default-class": "true"},
    },
    "spec": {"controller": "ferryman.io/ingress-controller"},
}
SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}, {"port": 9090}]},
}
SLICE = {
    "apiVersion": "discovery.k8s.io/v1",
    "kind": "EndpointSlice",
    "metadata": {
        "name": "web-1",
        "namespace": "shop",
        "labels": {"kubernetes.io/service-name": "web"},
    },
    "addressType": "IPv4",
    "ports": [{"name": "http", "port": 8080}],
    "endpoints": [
        {"addresses": ["10.0.0.1"], "conditions": {"ready": True}, "nodeName": "n1"},
        {"addresses": ["10.0.0.2", "10.0.0.3"]},
    ],
}
SECRET = tls_secret("site")

VALID: dict[str, tuple[Mapping[str, Any], Parser]] = {
    "Ingress": (INGRESS, parse_ingress),
    "IngressClass": (INGRESS_CLASS, parse_ingress_class),
    "Service": (SERVICE, parse_service),
    "EndpointSlice": (SLICE, parse_endpoint_slice),
    "Secret": (SECRET, parse_tls_secret),
}

# Random top-level objects: mostly the field names parsers look for.
FIELDS = st.sampled_from(
    [
        *("apiVersion", "kind", "metadata", "spec", "type", "data", "stringData"),
        *("addressType", "ports", "endpoints", "name", "namespace", "annotations", "labels"),
    ]
)
raw_objects = st.dictionaries(FIELDS | yaml_scalars, yaml_values, max_size=6)
# metadata that passes its first check, so the rest of the object is reached.
objects_with_names = st.builds(
    lambda obj, md: {**obj, "metadata": {"name": "x", **md}},
    raw_objects,
    st.dictionaries(FIELDS | yaml_scalars, yaml_values, max_size=4),
)


def only_invalid_resource(parse: Parser, obj: Mapping[str, Any]) -> None:
    try:
        parse(obj)
    except InvalidResource as e:
        assert e.errors, "InvalidResource without reasons"
        assert all(isinstance(reason, str) for reason in e.errors)


def test_the_fuzzed_objects_are_valid_to_start_with() -> None:
    for obj, parse in VALID.values():
        parse(obj)


@pytest.mark.parametrize("kind", sorted(VALID))
@FUZZ
@given(data=st.data())
def test_mutated_objects(kind: str, data: st.DataObject) -> None:
    valid, parse = VALID[kind]
    only_invalid_resource(parse, data.draw(mutations(valid)))


@FUZZ
@given(obj=raw_objects | objects_with_names)
def test_random_objects(obj: dict[Any, Any]) -> None:
    for _, parse in VALID.values():
        only_invalid_resource(parse, obj)
    only_invalid_resource(parse_meta, obj)


@FUZZ
@given(obj=raw_objects | objects_with_names | mutations(INGRESS) | mutations(SLICE))
def test_raw_readers_never_raise(obj: dict[Any, Any]) -> None:
    """What sources, the store and the class filter read before any parser runs."""
    name = raw_class_name(obj)
    assert name is None or isinstance(name, str)
    assert isinstance(service_name_of(obj), str)
    ref_of(obj)


def _corrupt(pem: bytes, label: str) -> st.SearchStrategy[bytes]:
    """A valid PEM block with a few bytes of its DER changed, cut short or extended."""
    der = base64.b64decode(b"".join(pem.splitlines()[1:-1]))

    def rebuild(edits: list[tuple[int, int]], cut: int, tail: bytes) -> bytes:
        body = bytearray(der)
        for at, value in edits:
            body[at % len(body)] = value
        body = body[: max(1, len(body) - cut)] + tail
        return (
            f"-----BEGIN {label}-----\n".encode()
            + base64.encodebytes(bytes(body))
            + f"-----END {label}-----\n".encode()
        )

    return st.builds(
        rebuild,
        st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=4),
        st.sampled_from([0, 0, 0, 1, 7, 50]),
        st.binary(max_size=4),
    )


CERT = cert_pem("site.example.com")
KEY = key_pem("site.example.com")


@FUZZ
@given(
    cert=_corrupt(CERT, "CERTIFICATE") | st.just(CERT) | st.binary(max_size=64),
    key=_corrupt(KEY, "PRIVATE KEY") | st.just(KEY) | st.binary(max_size=64),
)
def test_corrupted_certificates_and_keys(cert: bytes, key: bytes) -> None:
    obj = tls_secret("site", cert=cert, key=key)
    only_invalid_resource(parse_tls_secret, obj)
    state = SecretStore().update("default", "site", obj)
    assert (state.cert_id is None) != (state.error is None)


@FUZZ
@given(value=st.text(max_size=40) | st.sampled_from(["²", "٣", "1²", "/a\n", "*.", "a" * 300]))
def test_validation_functions_answer_every_string(value: str) -> None:
    for check in (
        validation.dns1123_label,
        validation.dns1123_subdomain,
        validation.dns1035_label,
        validation.host,
        validation.port_name,
        validation.nginx_time,
        validation.worker_processes,
    ):
        assert check(value) is None or isinstance(check(value), str)
    for path_type in ("Exact", "Prefix", "ImplementationSpecific"):
        problem = validation.http_path(value, path_type)
        assert problem is None or isinstance(problem, str)


@FUZZ
@given(value=yaml_values)
def test_port_number_answers_every_value(value: object) -> None:
    problem = validation.port_number(value)
    assert problem is None or isinstance(problem, str)


# ---- the manifests reader: text in, objects or problems out -----------------------


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as d:
        yield Path(d)


def _yaml_text(value: object) -> str:
    return yaml.safe_dump_all([value, INGRESS], default_flow_style=None)


yaml_documents = st.builds(_yaml_text, yaml_values | mutations(INGRESS) | mutations(SLICE))
# Text edits of a valid document: what a half-saved or hand-mangled file looks like.
mangled = st.builds(
    lambda text, at, insert: text[: at % (len(text) + 1)] + insert + text[at % (len(text) + 1) :],
    yaml_documents,
    st.integers(0, 10_000),
    st.text(alphabet="[]{}&*!|>:-,'\"\n #%@`?\t", max_size=6)
    | st.sampled_from(["!!int ", "!!float ", "!!bool ", "!!binary ", "!!set ", "!!omap ", "<<: "]),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=yaml_documents | mangled | st.text(max_size=60))
def test_manifest_files(scratch: Path, text: str) -> None:
    path = scratch / "fuzz.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    problems: list[tuple[str, str]] = []
    objs = parse_file(path, lambda where, message: problems.append((where, message)))
    assert objs is not None or problems
    for obj in (objs or {}).values():
        kind = obj.get("kind")
        if kind in VALID:
            only_invalid_resource(VALID[str(kind)][1], obj)
