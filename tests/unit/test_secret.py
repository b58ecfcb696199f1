"""ferryman.resources.secret.parse_tls_secret: only usable pairs reach NGINX."""

from __future__ import annotations

import base64
import textwrap

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from ferryman.resources.secret import InvalidSecret, parse_tls_secret

from ._tls import b64, cert_pem, key_pem, tls_secret


def rejected(obj: dict[str, object]) -> str:
    with pytest.raises(InvalidSecret) as info:
        parse_tls_secret(obj)
    return str(info.value)


def test_valid_pair_becomes_one_pem_bundle_key_first() -> None:
    pair = parse_tls_secret(tls_secret("site"))
    assert pair.pem.startswith(b"-----BEGIN PRIVATE KEY-----")
    # The bundle holds the key and the very certificate that was given.
    key = serialization.load_pem_private_key(pair.pem, password=None)
    (cert,) = x509.load_pem_x509_certificates(pair.pem[pair.pem.index(b"-----BEGIN CERT") :])
    assert cert.public_bytes(serialization.Encoding.PEM) == cert_pem("site.example.com")
    pub = serialization.PublicFormat.SubjectPublicKeyInfo
    assert key.public_key().public_bytes(serialization.Encoding.PEM, pub) == (
        cert.public_key().public_bytes(serialization.Encoding.PEM, pub)
    )


def test_certificate_chain_is_kept_in_order() -> None:
    chain = cert_pem("site.example.com") + cert_pem("intermediate.example.com")
    pair = parse_tls_secret(tls_secret("site", cert=chain))
    certs = x509.load_pem_x509_certificates(pair.pem[pair.pem.index(b"-----BEGIN CERT") :])
    assert [c.public_bytes(serialization.Encoding.PEM) for c in certs] == [
        cert_pem("site.example.com"),
        cert_pem("intermediate.example.com"),
    ]


def test_string_data_is_accepted() -> None:
    obj = {
        "type": "kubernetes.io/tls",
        "stringData": {
            "tls.crt": cert_pem("site.example.com").decode(),
            "tls.key": key_pem("site.example.com").decode(),
        },
    }
    assert parse_tls_secret(obj).pem.startswith(b"-----BEGIN PRIVATE KEY-----")


def test_line_wrapped_base64_is_accepted_like_the_api_server_does() -> None:
    # `base64 cert.pem` wraps at 76 columns; Go's base64 decoder (used by the
    # API server for Secret data) ignores the line breaks.
    obj = tls_secret("site")
    data = obj["data"]
    assert isinstance(data, dict)
    data["tls.crt"] = "\n".join(textwrap.wrap(data["tls.crt"], 76)) + "\n"
    assert parse_tls_secret(obj).pem.startswith(b"-----BEGIN PRIVATE KEY-----")


def test_mismatched_key_is_rejected() -> None:
    message = rejected(tls_secret("site", key=key_pem("someone-else")))
    assert "tls.key does not match the certificate" in message


def test_bad_base64_is_rejected() -> None:
    obj = tls_secret("site")
    obj["data"] = {"tls.crt": "not*base64!", "tls.key": b64(key_pem("site.example.com"))}
    message = rejected(obj)
    assert "tls.crt" in message
    assert "base64" in message


@pytest.mark.parametrize("type_", ["Opaque", None, "kubernetes.io/TLS"])
def test_wrong_type_is_rejected(type_: str | None) -> None:
    obj = tls_secret("site")
    if type_ is None:
        del obj["type"]
    else:
        obj["type"] = type_
    message = rejected(obj)
    assert "kubernetes.io/tls" in message
    assert repr(type_) in message


def test_non_pem_certificate_is_rejected() -> None:
    message = rejected(tls_secret("site", cert=b"hello, I am not a certificate\n"))
    assert "tls.crt is not a PEM certificate" in message


def test_der_certificate_is_rejected() -> None:
    der = x509.load_pem_x509_certificate(cert_pem("site.example.com")).public_bytes(
        serialization.Encoding.DER
    )
    assert "tls.crt" in rejected(tls_secret("site", cert=der))


def test_non_pem_key_is_rejected() -> None:
    message = rejected(tls_secret("site", key=b"-----BEGIN PRIVATE KEY-----\nAAAA\n"))
    assert "tls.key is not an unencrypted PEM private key" in message


def test_encrypted_key_is_rejected() -> None:
    key = serialization.load_pem_private_key(key_pem("site.example.com"), password=None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret"),
    )
    assert "tls.key" in rejected(tls_secret("site", key=encrypted))


@pytest.mark.parametrize("missing", ["tls.crt", "tls.key"])
def test_missing_field_is_rejected(missing: str) -> None:
    obj = tls_secret("site")
    data = obj["data"]
    assert isinstance(data, dict)
    del data[missing]
    message = rejected(obj)
    assert missing in message
    assert "missing" in message


def test_extra_text_around_pem_blocks_does_not_reach_nginx() -> None:
    noisy = b"# a comment } ;\n" + cert_pem("site.example.com") + b"trailing junk\n"
    obj = tls_secret("site", cert=noisy)
    pair = parse_tls_secret(obj)
    assert b"junk" not in pair.pem
    assert b"comment" not in pair.pem
    assert base64.b64decode(b64(pair.pem)) == pair.pem
