"""JSON Web Keys and signed tokens for tests, made with ``cryptography`` (RFC 7515/7518)."""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, utils

HASHES = {"256": hashes.SHA256, "384": hashes.SHA384, "512": hashes.SHA512}
CURVES = {"ES256": ("P-256", ec.SECP256R1), "ES384": ("P-384", ec.SECP384R1)}
CURVES["ES512"] = ("P-521", ec.SECP521R1)

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | bytes


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _int(value: int, size: int | None = None) -> str:
    return b64url(value.to_bytes(size or (value.bit_length() + 7) // 8, "big"))


def private_key(alg: str, seed: str = "") -> PrivateKey:
    """A key for ``alg`` (one per alg and ``seed``)."""
    return _private_key(alg, seed)


@functools.cache
def _private_key(alg: str, seed: str) -> PrivateKey:
    if alg.startswith(("RS", "PS")):
        return rsa.generate_private_key(65537, 2048)
    if alg.startswith("ES"):
        return ec.generate_private_key(CURVES[alg][1]())
    return hashlib.sha256(f"hmac-{alg}-{seed}".encode()).digest()


def jwk(alg: str, kid: str = "", seed: str = "", *, with_alg: bool = False) -> dict[str, Any]:
    """The public JWK of ``private_key(alg, seed)``."""
    key = private_key(alg, seed)
    out: dict[str, Any]
    if isinstance(key, rsa.RSAPrivateKey):
        numbers = key.public_key().public_numbers()
        out = {"kty": "RSA", "n": _int(numbers.n), "e": _int(numbers.e)}
    elif isinstance(key, ec.EllipticCurvePrivateKey):
        point = key.public_key().public_numbers()
        size = (key.curve.key_size + 7) // 8
        out = {
            "kty": "EC",
            "crv": CURVES[alg][0],
            "x": _int(point.x, size),
            "y": _int(point.y, size),
        }
    else:
        out = {"kty": "oct", "k": b64url(key)}
    if kid:
        out["kid"] = kid
    if with_alg:
        out["alg"] = alg
    return out


def jwks(*keys: dict[str, Any]) -> str:
    return json.dumps({"keys": list(keys)})


def token(
    alg: str,
    claims: dict[str, Any],
    kid: str = "",
    seed: str = "",
    key: PrivateKey | None = None,
) -> str:
    """A compact JWS of ``claims`` signed with ``private_key(alg, seed)`` (or ``key``)."""
    header: dict[str, Any] = {"alg": alg, "typ": "JWT"}
    if kid:
        header["kid"] = kid
    signing_input = (
        b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(claims).encode())
    ).encode()
    return (
        signing_input.decode()
        + "."
        + b64url(sign(alg, signing_input, key or private_key(alg, seed)))
    )


def sign(alg: str, data: bytes, key: PrivateKey) -> bytes:
    digest = HASHES[alg[2:]]()
    if isinstance(key, bytes):
        return hmac.new(key, data, getattr(hashlib, f"sha{alg[2:]}")).digest()
    if isinstance(key, rsa.RSAPrivateKey):
        if alg.startswith("PS"):
            pss = padding.PSS(padding.MGF1(digest), digest.digest_size)
            return key.sign(data, pss, digest)
        return key.sign(data, padding.PKCS1v15(), digest)
    r, s = utils.decode_dss_signature(key.sign(data, ec.ECDSA(digest)))
    size = (key.curve.key_size + 7) // 8
    return r.to_bytes(size, "big") + s.to_bytes(size, "big")


def jwk_secret(name: str, keys: str, namespace: str = "default") -> dict[str, Any]:
    """A ``nginx.org/jwk`` Secret holding the JWKS text ``keys``."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": "nginx.org/jwk",
        "data": {"jwk": base64.b64encode(keys.encode()).decode()},
    }
