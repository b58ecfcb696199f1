"""Every parser of user input, fed random shapes: the only failure is InvalidResource.

A parser that raises anything else (TypeError from a list where a map was
expected, ValueError from int("²"), UnsupportedAlgorithm from an odd curve)
escapes the per-resource rejection and leaves stale routes behind. Random
shapes test the first layers; mutations of valid objects reach the rest.
"""

from __future__ import annotations

import base64
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ferryman.engine.secrets import SecretStore
from ferryman.kinds import REGISTRY
from ferryman.resources import validation
from ferryman.resources.ingress_class import raw_class_name
from ferryman.resources.meta import InvalidResource, parse_meta, ref_of
from ferryman.resources.secret import parse_tls_secret
from ferryman.resources.service import service_name_of
from ferryman.sources import manifest_kinds
from ferryman.sources.manifests import parse_file
from testkit.parser_cases import INGRESS, SLICE, VALID, Parser, objects_with_names, raw_objects
from testkit.strategies import mutations, yaml_values
from testkit.tls import cert_pem, key_pem, tls_secret

# Enough to find a shape no one thought of, few enough for CI (~1 s a test).
FUZZ = settings(max_examples=300, deadline=None)


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
    objs = parse_file(
        path, lambda where, message: problems.append((where, message)), manifest_kinds(REGISTRY)
    )
    assert objs is not None or problems
    for obj in (objs or {}).values():
        kind = obj.get("kind")
        if kind in VALID:
            only_invalid_resource(VALID[str(kind)][1], obj)
