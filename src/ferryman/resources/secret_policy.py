"""The Secrets NIC's policies read: ``nginx.org/htpasswd`` and ``nginx.org/apikey``.

Their checks and messages are NIC's (internal/k8s/secrets/validation.go). The
content is not checked further, as in NIC: an htpasswd line NGINX cannot use
just never matches (NGINX answers 401 for it). One check ferryman adds: a
user whose hash costs more than the bound (``htpasswd_cost``) is left out,
because checking it would stall the NGINX worker; when no user is left, the
Secret is invalid.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ferryman.resources.htpasswd_cost import screen_htpasswd
from ferryman.resources.secret import TLS_TYPE, InvalidSecret

HTPASSWD_TYPE = "nginx.org/htpasswd"
APIKEY_TYPE = "nginx.org/apikey"
HTPASSWD_KEY = "htpasswd"
# The Secret types ferryman reads: TLS, and those of NIC's policies (the
# CA and JWK ones for ingressMTLS, egressMTLS and jwt). Kubernetes mode lists
# these only.
SECRET_TYPES = (TLS_TYPE, HTPASSWD_TYPE, APIKEY_TYPE, "nginx.org/ca", "nginx.org/jwk")
# The types NIC's secret store keeps; a Secret of another type is to NIC one
# that "doesn't exist or of an unsupported type".
SUPPORTED_TYPES = frozenset(
    [
        "kubernetes.io/tls",
        "nginx.org/ca",
        "nginx.org/jwk",
        "nginx.org/oidc",
        HTPASSWD_TYPE,
        APIKEY_TYPE,
        "nginx.com/license",
    ]
)


@dataclass(frozen=True)
class Htpasswd:
    content: bytes
    refused: tuple[str, ...] = ()  # the users left out, for the Warning


@dataclass(frozen=True)
class APIKeys:
    clients: tuple[tuple[str, bytes], ...]  # (client ID, key), by client ID


def _data(obj: Mapping[str, Any]) -> dict[str, bytes]:
    """``data`` (base64) and ``stringData`` (manifests mode) as bytes."""
    out: dict[str, bytes] = {}
    data = obj.get("data")
    if isinstance(data, Mapping):
        for key, value in data.items():
            if isinstance(key, str) and isinstance(value, str):
                try:
                    out[key] = base64.b64decode("".join(value.split()), validate=True)
                except (binascii.Error, ValueError) as e:
                    raise InvalidSecret(f"data[{key!r}] is not valid base64") from e
    string_data = obj.get("stringData")
    if isinstance(string_data, Mapping):
        for key, value in string_data.items():
            if isinstance(key, str) and isinstance(value, str):
                out[key] = value.encode("utf-8", "surrogatepass")
    return out


def parse_htpasswd_secret(obj: Mapping[str, Any]) -> Htpasswd:
    if obj.get("type") != HTPASSWD_TYPE:
        raise InvalidSecret(f"htpasswd secret must be of the type {HTPASSWD_TYPE}")
    data = _data(obj)
    if HTPASSWD_KEY not in data:
        raise InvalidSecret(f"htpasswd secret must have the data field {HTPASSWD_KEY}")
    screened = screen_htpasswd(data[HTPASSWD_KEY])
    if screened.refused and not screened.usable:
        raise InvalidSecret("no usable htpasswd line: " + "; ".join(screened.refused))
    return Htpasswd(screened.content, screened.refused)


def parse_apikey_secret(obj: Mapping[str, Any]) -> APIKeys:
    if obj.get("type") != APIKEY_TYPE:
        raise InvalidSecret(f"APIKey secret must be of the type {APIKEY_TYPE}")
    data = _data(obj)
    if len(set(data.values())) != len(data):
        raise InvalidSecret("API Keys cannot be repeated")
    return APIKeys(tuple(sorted(data.items())))
