"""The local secret store: validated TLS pairs written as 0600 files for NGINX.

Each file name carries a digest of its content, so a rotated certificate is a
new path and therefore a configuration change NGINX picks up on reload, while
the old file stays until a reload has succeeded (a rollback may still need it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ferryman.configs.ingress import SecretState
from ferryman.dataplane.files import atomic_write
from ferryman.resources.secret import InvalidSecret, parse_tls_secret


class SecretStore:
    def __init__(self, directory: Path) -> None:
        self._dir = directory
        self._dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._states: dict[tuple[str, str], SecretState] = {}

    def update(self, namespace: str, name: str, obj: Mapping[str, Any] | None) -> SecretState:
        if obj is None:
            state = SecretState(None, "not found")
        else:
            try:
                pair = parse_tls_secret(obj)
            except InvalidSecret as e:
                state = SecretState(None, str(e))
            else:
                digest = hashlib.sha256(pair.pem).hexdigest()[:16]
                path = self._dir / f"{namespace}_{name}_{digest}.pem"
                if not path.exists():
                    atomic_write(path, pair.pem, mode=0o600)
                state = SecretState(str(path), None)
        self._states[(namespace, name)] = state
        return state

    def get(self, namespace: str, name: str) -> SecretState:
        return self._states.get((namespace, name), SecretState(None, "not found"))

    def collect_garbage(self) -> None:
        """Remove files no current state points at; call after a good reload."""
        live = {s.bundle_path for s in self._states.values() if s.bundle_path}
        for path in self._dir.glob("*.pem"):
            if str(path) not in live:
                path.unlink(missing_ok=True)
