"""What the local secret store knows of one Secret, as every kind's records
read it (a TLS pair's id in the data plane, or why it cannot be used)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SecretState:
    """What the local secret store knows of one Secret."""

    cert_id: str | None
    error: str | None  # why the secret cannot be used, when cert_id is None
