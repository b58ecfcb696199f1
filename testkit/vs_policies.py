"""Policy and Secret documents, Events, statuses and crypt(3) hashes for the Policy tests.

Moved from tests/integration/test_vs_policies.py, whose tests and others share them."""

from __future__ import annotations

import base64
import ctypes
from typing import Any

from testkit.harness import (
    Ferryman,
)


def policy(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "Policy",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def refs(*names: str) -> list[dict[str, str]]:
    return [{"name": n} for n in names]


def status(f: Ferryman, host: str, p: str = "/", **kw: Any) -> int:
    return f.get(host, p, **kw).status


def last_event(f: Ferryman, name: str, kind: str = "VirtualServer") -> dict[str, str]:
    return [e for e in f.events_for(name) if e.get("kind") == kind][-1]


def rate_limit(name: str, **fields: Any) -> dict[str, Any]:
    return policy(name, rateLimit={"key": "${binary_remote_addr}", "zoneSize": "10M", **fields})


def secret(name: str, type_: str, data: dict[str, bytes]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "default"},
        "type": type_,
        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
    }


_libcrypt = ctypes.CDLL("libcrypt.so.1")
_libcrypt.crypt.restype = ctypes.c_char_p
_libcrypt.crypt.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
_libcrypt.crypt_gensalt.restype = ctypes.c_char_p
_libcrypt.crypt_gensalt.argtypes = [ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p, ctypes.c_int]


def libc_hash(password: str, prefix: str) -> str:
    """crypt(3) as htpasswd tools call it, with a fresh salt for ``prefix`` ("" is DES)."""
    setting = _libcrypt.crypt_gensalt(prefix.encode(), 0, None, 0) if prefix else b"ab"
    return str(_libcrypt.crypt(password.encode(), setting).decode())
