"""ferryman.resources.secret.parse_tls_secret and ferryman.engine.secrets.SecretStore:
only usable pairs reach NGINX, as push records named by their content."""

from __future__ import annotations

import base64
import re
import textwrap

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from ferryman.configs.secret_state import SecretState
from ferryman.engine.secrets import SecretStore
from ferryman.resources.meta import InvalidResource
from ferryman.resources.secret import (
    MAX_CHAIN_BYTES,
    MAX_KEY_BYTES,
    InvalidSecret,
    TLSPair,
    parse_tls_secret,
)
from testkit.tls import b64, cert_pem, key_pem, tls_secret


def rejected(obj: dict[str, object]) -> str:
    with pytest.raises(InvalidSecret) as info:
        parse_tls_secret(obj)
    return str(info.value)


def certificates(chain: bytes) -> list[bytes]:
    return [
        c.public_bytes(serialization.Encoding.PEM) for c in x509.load_pem_x509_certificates(chain)
    ]


def only_pem_blocks(data: bytes, label: str) -> bool:
    block = rf"-----BEGIN {label}-----\n[A-Za-z0-9+/=\n]+-----END {label}-----\n"
    return re.fullmatch(rf"({block})+", data.decode("ascii")) is not None


def test_valid_pair_is_the_chain_and_the_key() -> None:
    pair = parse_tls_secret(tls_secret("site"))
    assert only_pem_blocks(pair.chain, "CERTIFICATE")
    assert only_pem_blocks(pair.key, "PRIVATE KEY")
    # The very certificate that was given, and a key that belongs to it.
    assert certificates(pair.chain) == [cert_pem("site.example.com")]
    key = serialization.load_pem_private_key(pair.key, password=None)
    cert = x509.load_pem_x509_certificate(pair.chain)
    pub = serialization.PublicFormat.SubjectPublicKeyInfo
    assert key.public_key().public_bytes(serialization.Encoding.PEM, pub) == (
        cert.public_key().public_bytes(serialization.Encoding.PEM, pub)
    )


def test_traditional_key_is_re_serialised_as_pkcs8() -> None:
    key = serialization.load_pem_private_key(key_pem("site.example.com"), password=None)
    traditional = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    assert traditional.startswith(b"-----BEGIN EC PRIVATE KEY-----")
    pair = parse_tls_secret(tls_secret("site", key=traditional))
    assert pair.key == key_pem("site.example.com")


def test_certificate_chain_is_kept_in_order() -> None:
    chain = cert_pem("site.example.com") + cert_pem("intermediate.example.com")
    pair = parse_tls_secret(tls_secret("site", cert=chain))
    assert certificates(pair.chain) == [
        cert_pem("site.example.com"),
        cert_pem("intermediate.example.com"),
    ]
    assert pair.chain == chain


def test_string_data_is_accepted() -> None:
    obj = {
        "type": "kubernetes.io/tls",
        "stringData": {
            "tls.crt": cert_pem("site.example.com").decode(),
            "tls.key": key_pem("site.example.com").decode(),
        },
    }
    assert parse_tls_secret(obj) == parse_tls_secret(tls_secret("site"))


def test_line_wrapped_base64_is_accepted_like_the_api_server_does() -> None:
    # `base64 cert.pem` wraps at 76 columns; Go's base64 decoder (used by the
    # API server for Secret data) ignores the line breaks.
    obj = tls_secret("site")
    data = obj["data"]
    assert isinstance(data, dict)
    data["tls.crt"] = "\n".join(textwrap.wrap(data["tls.crt"], 76)) + "\n"
    assert parse_tls_secret(obj) == parse_tls_secret(tls_secret("site"))


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


def test_certificate_of_an_unknown_x509_version_is_rejected() -> None:
    # Found by CI's fuzzing: cryptography raises InvalidVersion, not ValueError, for a
    # version field other than v1 or v3, and that escaped as a crash of the sync.
    der = x509.load_pem_x509_certificate(cert_pem("site.example.com")).public_bytes(
        serialization.Encoding.DER
    )
    v3 = bytes.fromhex("a003020102")
    assert v3 in der
    v2 = der.replace(v3, bytes.fromhex("a003020101"), 1)
    pem = b"-----BEGIN CERTIFICATE-----\n" + base64.encodebytes(v2) + b"-----END CERTIFICATE-----\n"
    message = rejected(tls_secret("site", cert=pem))
    assert "tls.crt is not a PEM certificate" in message


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
    assert pair.chain == cert_pem("site.example.com")
    assert only_pem_blocks(pair.chain, "CERTIFICATE")
    for field in (pair.chain, pair.key):
        assert b"junk" not in field
        assert b"comment" not in field


# ---- SecretStore -------------------------------------------------------------------------

ID_RE = re.compile(r"default/site@[0-9a-f]{16}")


def decode_record(record: str) -> TLSPair:
    chain, key = record.split("\t")
    return TLSPair(base64.b64decode(chain, validate=True), base64.b64decode(key, validate=True))


def test_store_names_a_valid_pair_and_records_it() -> None:
    store = SecretStore()
    state = store.update("default", "site", tls_secret("site"))
    assert state.error is None
    assert state.cert_id is not None
    assert ID_RE.fullmatch(state.cert_id), state.cert_id
    record = store.record(state.cert_id)
    assert record is not None
    # Two base64 fields, one tab between them, nothing else: one push-record value.
    assert re.fullmatch(r"[A-Za-z0-9+/=]+\t[A-Za-z0-9+/=]+", record), record
    assert decode_record(record) == parse_tls_secret(tls_secret("site"))


def test_store_id_names_the_content() -> None:
    store = SecretStore()
    first = store.update("default", "site", tls_secret("site")).cert_id
    assert store.update("default", "site", tls_secret("site")).cert_id == first
    # Same content under another name or namespace: another id.
    other = store.update("other", "site", tls_secret("site")).cert_id
    assert other is not None
    assert other != first
    assert other.startswith("other/site@")


def test_store_rotation_changes_the_id_and_drops_the_old_record() -> None:
    store = SecretStore()
    old = store.update("default", "site", tls_secret("site")).cert_id
    rotated = tls_secret(
        "site", cert=cert_pem("site.example.com", "rotated"), key=key_pem("rotated")
    )
    new = store.update("default", "site", rotated).cert_id
    assert old is not None
    assert new is not None
    assert new != old
    assert ID_RE.fullmatch(new)
    assert store.record(old) is None
    record = store.record(new)
    assert record is not None
    assert decode_record(record).key == key_pem("rotated")


def test_store_invalid_secret_has_no_id_and_says_why() -> None:
    store = SecretStore()
    old = store.update("default", "site", tls_secret("site")).cert_id
    assert old is not None
    state = store.update("default", "site", tls_secret("site", key=key_pem("someone-else")))
    assert state.cert_id is None
    assert state.error is not None
    assert "does not match" in state.error
    assert store.record(old) is None


def test_store_deleted_secret_is_not_found() -> None:
    store = SecretStore()
    old = store.update("default", "site", tls_secret("site")).cert_id
    assert old is not None
    assert store.update("default", "site", None) == SecretState(None, "not found")
    assert store.record(old) is None


def test_store_keeps_other_secrets() -> None:
    store = SecretStore()
    a = store.update("default", "a", tls_secret("a")).cert_id
    b = store.update("default", "b", tls_secret("b")).cert_id
    assert a is not None
    assert b is not None
    store.update("default", "a", None)
    assert store.record(a) is None
    assert store.record(b) is not None


def test_store_unknown_id_has_no_record() -> None:
    assert SecretStore().record("default/site@0000000000000000") is None


# ---- hostile and unusual input: every failure is InvalidSecret, an InvalidResource ----

# secp112r1: OpenSSL makes and reads it, cryptography refuses it (UnsupportedAlgorithm).
# Made with `openssl ecparam -name secp112r1 -genkey -noout` and `openssl req -x509`.
SECP112R1_KEY = b"""\
-----BEGIN EC PRIVATE KEY-----
MD4CAQEEDqu2K77szx2IoN6cwZYyoAcGBSuBBAAGoSADHgAEooNkKuO7HLL9vzH3
Cl26alKIMQjqc57na8Z47Q==
-----END EC PRIVATE KEY-----
"""
SECP112R1_CERT = b"""\
-----BEGIN CERTIFICATE-----
MIIBITCB7KADAgECAhQ6YObTHvLeM7zYcTfCq5++S9q2rzAKBggqhkjOPQQDAjAM
MQowCAYDVQQDDAF4MB4XDTI2MTEyMzEyNDczN1oXDTI2MTEyNDEyNDczN1owDDEK
MAgGA1UEAwwBeDAyMBAGByqGSM49AgEGBSuBBAAGAx4ABKKDZCrjuxyy/b8x9wpd
umpSiDEI6nOe52vGeO2jUzBRMB0GA1UdDgQWBBS9L/A7lliDEOtmNFPNPPCTqo7o
EjAfBgNVHSMEGDAWgBS9L/A7lliDEOtmNFPNPPCTqo7oEjAPBgNVHRMBAf8EBTAD
AQH/MAoGCCqGSM49BAMCAyQAMCECDmAv4O2rumhS6vG88riqAg8A0DTTRFNc8xJL
tc7clAo=
-----END CERTIFICATE-----
"""


def test_invalid_secret_is_an_invalid_resource() -> None:
    assert issubclass(InvalidSecret, InvalidResource)
    assert InvalidSecret("tls.crt: bad").errors == ["tls.crt: bad"]


def test_a_key_on_an_unsupported_curve_is_rejected() -> None:
    message = rejected(tls_secret("site", cert=SECP112R1_CERT, key=SECP112R1_KEY))
    assert message.startswith("tls.key is not an unencrypted PEM private key: ")
    assert "not supported" in message


def test_a_certificate_on_an_unsupported_curve_is_rejected() -> None:
    message = rejected(tls_secret("site", cert=SECP112R1_CERT))
    assert message.startswith("tls.crt has a public key ferryman cannot use: ")


def test_the_store_reports_an_unsupported_curve() -> None:
    state = SecretStore().update("default", "site", tls_secret("site", key=SECP112R1_KEY))
    assert state.cert_id is None
    assert state.error is not None and "tls.key" in state.error


def test_a_chain_over_the_limit_is_rejected() -> None:
    leaf = cert_pem("site.example.com")
    count = MAX_CHAIN_BYTES // len(leaf)
    assert parse_tls_secret(tls_secret("site", cert=leaf * count)).chain == leaf * count
    chain = leaf * (count + 1)
    assert rejected(tls_secret("site", cert=chain)) == (
        f"tls.crt is {len(chain)} bytes; at most {MAX_CHAIN_BYTES} are allowed"
    )


def test_a_key_over_the_limit_is_rejected() -> None:
    key = key_pem("site.example.com") + b"\n" * MAX_KEY_BYTES
    assert rejected(tls_secret("site", key=key)) == (
        f"tls.key is {len(key)} bytes; at most {MAX_KEY_BYTES} are allowed"
    )


def test_string_data_that_is_not_text_is_rejected() -> None:
    obj = {
        "type": "kubernetes.io/tls",
        "stringData": {"tls.crt": "\ud800", "tls.key": key_pem("site.example.com").decode()},
    }
    assert rejected(obj) == "stringData['tls.crt'] is not valid text"
