"""nginx.org/jwk Secrets: a JSON Web Key Set, turned into keys the data plane verifies with.

NGINX Plus reads the set itself (``auth_jwt_key_file``) and answers 500 for a
set it cannot use; ferryman checks it when the Secret is read, so the Policy's
user gets the reason, and hands NGINX only what libcrypto needs: a public key as
PEM SubjectPublicKeyInfo (what ``PEM_read_bio_PUBKEY`` reads), or an HMAC
secret's bytes, each with the algorithms it may verify. Which algorithm fits
which key is decided here once, not per request.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ferryman.resources.secret import InvalidSecret, field

JWK_TYPE = "nginx.org/jwk"
JWK_KEY = "jwk"
# A set of a few dozen RSA keys is ~30 KB of JSON; every key travels to NGINX's
# shared memory.
MAX_JWKS_BYTES = 256 * 1024
RSA_ALGS: tuple[str, ...] = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
HMAC_ALGS: tuple[str, ...] = ("HS256", "HS384", "HS512")
# RFC 7518 3.4: each ES algorithm names its curve.
CURVE_ALG = {"P-256": "ES256", "P-384": "ES384", "P-521": "ES512"}
ALGORITHMS = (*RSA_ALGS, *CURVE_ALG.values(), *HMAC_ALGS)
_URL_ALPHABET = str.maketrans("-_", "+/")


@dataclass(frozen=True)
class VerifyKey:
    kid: str  # "" when the key has none
    algs: tuple[str, ...]  # the JWS algorithms this key verifies
    material: bytes  # PEM SubjectPublicKeyInfo, or the HMAC secret


@dataclass(frozen=True)
class KeySet:
    keys: tuple[VerifyKey, ...]

    def record(self) -> str:
        """The push value (ferryman_jwt.lua reads it): per key, space-separated,
        ``<base64 kid>:<alg,alg...>:<base64 material>`` (kid "-" when none)."""
        return " ".join(
            ":".join(
                (
                    base64.b64encode(k.kid.encode()).decode() if k.kid else "-",
                    ",".join(k.algs),
                    base64.b64encode(k.material).decode(),
                )
            )
            for k in self.keys
        )


def parse_jwk_secret(obj: Mapping[str, Any]) -> KeySet:
    """NIC's checks of type and field, then every key of the set."""
    if obj.get("type") != JWK_TYPE:
        raise InvalidSecret(f"JWK secret must be of the type {JWK_TYPE}")
    data = obj.get("data")
    string_data = obj.get("stringData")
    if not any(isinstance(d, Mapping) and JWK_KEY in d for d in (data, string_data)):
        raise InvalidSecret(f"JWK secret must have the data field {JWK_KEY}")
    raw = field(obj, JWK_KEY, MAX_JWKS_BYTES)
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise InvalidSecret(f"the data field {JWK_KEY} is not JSON: {e}") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("keys"), list):
        raise InvalidSecret(
            f'the data field {JWK_KEY} must be a JSON Web Key Set: {{"keys": [...]}}'
        )
    if not doc["keys"]:
        raise InvalidSecret(f"the data field {JWK_KEY} holds no keys")
    return KeySet(tuple(_key(i, k) for i, k in enumerate(doc["keys"])))


def _key(index: int, jwk: object) -> VerifyKey:
    where = f"keys[{index}]"
    if not isinstance(jwk, dict):
        raise InvalidSecret(f"{where} is not a JSON object")
    kid = jwk.get("kid", "")
    if not isinstance(kid, str):
        raise InvalidSecret(f"{where}.kid must be a string")
    alg = jwk.get("alg", "")
    if not isinstance(alg, str) or (alg and alg not in ALGORITHMS):
        supported = ", ".join(ALGORITHMS)
        raise InvalidSecret(f"{where}.alg {alg!r} is not supported (supported: {supported})")
    kty = jwk.get("kty")
    # NIC's own secrets generator writes "Oct" (hack/secrets-gen/jwks-gen.go) and
    # NGINX Plus accepts it: the type is read without regard to case.
    kind = kty.lower() if isinstance(kty, str) else kty
    if kind == "rsa":
        material, algs = _rsa(where, jwk), RSA_ALGS
    elif kind == "ec":
        material, algs = _ec(where, jwk)
    elif kind == "oct":
        material, algs = _octets(where, jwk, "k"), HMAC_ALGS
        if not material:
            raise InvalidSecret(f"{where}.k is empty")
    else:
        raise InvalidSecret(f"{where}.kty {kty!r} is not supported (supported: RSA, EC, oct)")
    if alg and alg not in algs:
        raise InvalidSecret(f"{where}.alg {alg} does not fit a key of kty {kty}")
    return VerifyKey(kid, (alg,) if alg else algs, material)


def _octets(where: str, jwk: Mapping[str, object], member: str) -> bytes:
    value = jwk.get(member)
    if not isinstance(value, str):
        raise InvalidSecret(f"{where}.{member} is missing")
    try:
        # base64url, without padding as RFC 7515 writes it (with it tolerated).
        standard = value.rstrip("=").translate(_URL_ALPHABET)
        return base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True)
    except (binascii.Error, ValueError) as e:
        raise InvalidSecret(f"{where}.{member} is not base64url") from e


def _public_pem(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return bytes(
        key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


def _rsa(where: str, jwk: Mapping[str, object]) -> bytes:
    from cryptography.hazmat.primitives.asymmetric import rsa

    n = int.from_bytes(_octets(where, jwk, "n"), "big")
    e = int.from_bytes(_octets(where, jwk, "e"), "big")
    try:
        return _public_pem(rsa.RSAPublicNumbers(e, n).public_key())
    except ValueError as err:
        raise InvalidSecret(f"{where} is not a usable RSA public key: {err}") from err


def _ec(where: str, jwk: Mapping[str, object]) -> tuple[bytes, tuple[str, ...]]:
    from cryptography.hazmat.primitives.asymmetric import ec

    curves: dict[str, ec.EllipticCurve] = {
        "P-256": ec.SECP256R1(),
        "P-384": ec.SECP384R1(),
        "P-521": ec.SECP521R1(),
    }
    crv = jwk.get("crv")
    if not isinstance(crv, str) or crv not in curves:
        raise InvalidSecret(
            f"{where}.crv {crv!r} is not supported (supported: P-256, P-384, P-521)"
        )
    x = int.from_bytes(_octets(where, jwk, "x"), "big")
    y = int.from_bytes(_octets(where, jwk, "y"), "big")
    try:
        key = ec.EllipticCurvePublicNumbers(x, y, curves[crv]).public_key()
    except ValueError as err:
        raise InvalidSecret(f"{where} is not a point on {crv}: {err}") from err
    return _public_pem(key), (CURVE_ALG[crv],)
