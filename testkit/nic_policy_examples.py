"""Secrets, credentials and the CORS preflight of NIC's policy examples.

Moved from tests/integration/test_nic_policy_examples.py, whose tests and others share them."""

from __future__ import annotations

import base64
from typing import Any


def _secret(name: str, type_: str, data: dict[str, bytes]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "default"},
        "type": type_,
        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
    }


def _basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


PREFLIGHT = {
    "Origin": "https://app.example.com",
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "Content-Type",
}
