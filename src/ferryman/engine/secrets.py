"""The local secret store: validated TLS pairs, kept in memory for the push channel.

Certificates reach NGINX over its unix socket (owner-only) and live in its
shared memory; they are never written to disk. Each pair gets an id that names
its content (``namespace/name@digest``), so a rotated certificate is a new id and
a worker's parsed-certificate cache can never serve stale content.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from typing import Any

from ferryman.configs.secret_state import SecretState
from ferryman.resources.meta import InvalidResource
from ferryman.resources.secret import TLSPair, parse_tls_secret


class SecretStore:
    def __init__(self) -> None:
        self._pairs: dict[str, TLSPair] = {}
        self._ids: dict[tuple[str, str], str] = {}

    def update(self, namespace: str, name: str, obj: Mapping[str, Any] | None) -> SecretState:
        old = self._ids.pop((namespace, name), None)
        if old is not None:
            self._pairs.pop(old, None)
        if obj is None:
            return SecretState(None, "not found")
        try:
            pair = parse_tls_secret(obj)
        except InvalidResource as e:
            return SecretState(None, str(e))
        digest = hashlib.sha256(pair.chain + pair.key).hexdigest()[:16]
        cert_id = f"{namespace}/{name}@{digest}"
        self._pairs[cert_id] = pair
        self._ids[(namespace, name)] = cert_id
        return SecretState(cert_id, None)

    def record(self, cert_id: str) -> str | None:
        """The push record value for a certificate: base64 chain, tab, base64 key."""
        pair = self._pairs.get(cert_id)
        if pair is None:
            return None
        return base64.b64encode(pair.chain).decode() + "\t" + base64.b64encode(pair.key).decode()
