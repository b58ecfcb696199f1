"""nginx.org/jwk and nginx.org/ca Secrets: what is accepted, what the data plane gets,
and the reason for each refusal."""

from __future__ import annotations

import base64
import contextlib
import json

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from hypothesis import given
from hypothesis import strategies as st

from ferryman.resources.secret import InvalidSecret
from ferryman.resources.secret_ca import parse_ca_secret
from ferryman.resources.secret_jwk import HMAC_ALGS, RSA_ALGS, parse_jwk_secret
from testkit.jose import b64url, jwk, jwk_secret, jwks, private_key
from testkit.pki import authority, ca_secret, crl_pem, issue


def _problem(obj: dict[str, object], parse: object) -> str:
    with pytest.raises(InvalidSecret) as e:
        parse(obj)  # type: ignore[operator]
    return str(e.value)


def test_jwks_keys_become_pem_or_secret_with_their_algorithms() -> None:
    keys = parse_jwk_secret(
        jwk_secret(
            "k", jwks(jwk("RS256", "r"), jwk("ES384", "e"), jwk("HS256", "h", with_alg=True))
        )
    ).keys
    assert [(k.kid, k.algs) for k in keys] == [
        ("r", RSA_ALGS),
        ("e", ("ES384",)),
        ("h", ("HS256",)),
    ]
    rsa_key = private_key("RS256")
    assert not isinstance(rsa_key, bytes)
    assert keys[0].material == rsa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    assert keys[2].material == private_key("HS256")


def test_nic_example_secret_is_read() -> None:
    """NIC's examples' jwk-secret: one oct key, kid 0001."""
    keys = parse_jwk_secret(
        jwk_secret("jwk-secret", '{"keys":[{"k":"ZmFudGFzdGljand0","kid":"0001","kty":"oct"}]}')
    ).keys
    assert [(k.kid, k.algs, k.material) for k in keys] == [("0001", HMAC_ALGS, b"fantasticjwt")]


def test_nic_generated_secret_with_capitalised_kty_and_standard_base64() -> None:
    """NIC's secrets generator: kty "Oct", k in standard base64 with padding."""
    doc = '{"keys":[{"kty":"Oct","kid":"0001","k":"ZmFudGFzdGljand0Pz8/Pw=="}]}'
    (key,) = parse_jwk_secret(jwk_secret("jwt-master-jwk", doc)).keys
    assert key.material == b"fantasticjwt????"


def test_record_names_each_key() -> None:
    keys = parse_jwk_secret(jwk_secret("k", jwks(jwk("HS384", "a b"), jwk("HS512"))))
    first, second = keys.record().split(" ")
    assert first == "YSBi:HS256,HS384,HS512:" + base64.b64encode(private_key("HS384")).decode()
    assert second.startswith("-:HS256,HS384,HS512:")


@pytest.mark.parametrize(
    ("secret", "message"),
    [
        ({"type": "Opaque", "data": {}}, "JWK secret must be of the type nginx.org/jwk"),
        ({"type": "nginx.org/jwk", "data": {}}, "JWK secret must have the data field jwk"),
        (jwk_secret("k", "{"), "the data field jwk is not JSON"),
        (jwk_secret("k", '{"kty": "oct", "k": "YQ"}'), "must be a JSON Web Key Set"),
        (jwk_secret("k", '{"keys": []}'), "holds no keys"),
        (jwk_secret("k", '{"keys": [{"kty": "OKP"}]}'), "keys[0].kty 'OKP' is not supported"),
        (jwk_secret("k", '{"keys": [{"kty": "oct"}]}'), "keys[0].k is missing"),
        (jwk_secret("k", '{"keys": [{"kty": "oct", "k": ""}]}'), "keys[0].k is empty"),
        (jwk_secret("k", '{"keys": [{"kty": "oct", "k": "YQ", "alg": "RS256"}]}'), "does not fit"),
        (jwk_secret("k", '{"keys": [{"kty": "oct", "k": "YQ", "alg": "none"}]}'), "not supported"),
        (jwk_secret("k", '{"keys": [{"kty": "EC", "crv": "P-192"}]}'), "crv 'P-192'"),
        (
            jwk_secret("k", '{"keys": [{"kty": "EC", "crv": "P-256", "x": "AQ", "y": "AQ"}]}'),
            "not a point",
        ),
        (jwk_secret("k", '{"keys": [{"kty": "RSA", "n": "AQ", "e": "AQ"}]}'), "not a usable RSA"),
        (jwk_secret("k", '{"keys": [{"kty": "oct", "k": "!!"}]}'), "keys[0].k is not base64url"),
        (
            jwk_secret("k", '{"keys": [{"kty": "oct", "k": "YQ", "kid": 1}]}'),
            "kid must be a string",
        ),
    ],
)
def test_jwks_refusals_say_why(secret: dict[str, object], message: str) -> None:
    assert message in _problem(secret, parse_jwk_secret)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
        max_leaves=20,
    )
)
def test_any_json_is_a_key_set_or_a_reason(doc: object) -> None:
    for value in (doc, {"keys": doc}, {"keys": [doc]}):
        with contextlib.suppress(InvalidSecret):
            parse_jwk_secret(jwk_secret("k", json.dumps(value)))


def test_ca_bundle_keeps_every_certificate_and_the_crl() -> None:
    revoked = issue("ca-a", "revoked")
    ca_pem = authority("ca-a").cert_pem + authority("ca-b").cert_pem
    bundle = parse_ca_secret(ca_secret("ca", ca_pem, crl_pem("ca-a", [revoked])))
    assert [c.subject for c in x509.load_pem_x509_certificates(bundle.certificates)] == [
        authority("ca-a").cert.subject,
        authority("ca-b").cert.subject,
    ]
    crl = x509.load_pem_x509_crl(bundle.crl)
    assert crl.get_revoked_certificate_by_serial_number(revoked.cert.serial_number) is not None
    certs_b64, crl_b64 = bundle.record().split(" ")
    assert base64.b64decode(certs_b64) == bundle.certificates
    assert base64.b64decode(crl_b64) == bundle.crl


def test_ca_crl_in_der_is_read() -> None:
    der = x509.load_pem_x509_crl(crl_pem("ca-a", [])).public_bytes(serialization.Encoding.DER)
    bundle = parse_ca_secret(ca_secret("ca", authority("ca-a").cert_pem, der))
    assert bundle.crl.startswith(b"-----BEGIN X509 CRL-----")


def test_ca_without_crl_has_a_one_field_record() -> None:
    bundle = parse_ca_secret(ca_secret("ca", authority("ca-a").cert_pem))
    assert bundle.crl == b"" and " " not in bundle.record()


@pytest.mark.parametrize(
    ("secret", "message"),
    [
        ({"type": "kubernetes.io/tls", "data": {}}, "CA secret must be of the type nginx.org/ca"),
        ({"type": "nginx.org/ca", "data": {}}, "CA secret must have the data field ca.crt"),
        (
            ca_secret("ca", b"not pem"),
            "the data field ca.crt must hold a valid CERTIFICATE PEM block",
        ),
        (
            ca_secret("ca", b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
            "ca.crt",
        ),
        (
            ca_secret("ca", authority("ca-a").cert_pem, b"junk"),
            "the data field ca.crl must hold a PEM or DER CRL",
        ),
    ],
)
def test_ca_refusals_say_why(secret: dict[str, object], message: str) -> None:
    assert message in _problem(secret, parse_ca_secret)


def test_base64url_helper_matches_rfc7515() -> None:
    assert b64url(b"\xfb\xff") == "-_8"


@given(st.binary(max_size=300), st.one_of(st.none(), st.binary(max_size=300)))
def test_any_ca_bytes_are_a_bundle_or_a_reason(ca: bytes, crl: bytes | None) -> None:
    pem = b"-----BEGIN CERTIFICATE-----\n" + base64.encodebytes(ca) + b"-----END CERTIFICATE-----\n"
    for data in (ca, pem):
        with contextlib.suppress(InvalidSecret):
            parse_ca_secret(ca_secret("ca", data, crl))
