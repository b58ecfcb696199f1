"""What the local secret store knows of one Secret, as every kind's records
read it (a TLS pair's id in the data plane, or why it cannot be used), and a
Secret's content as one parser reads it (a policy's htpasswd, API keys...)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class SecretState:
    """What the local secret store knows of one Secret."""

    cert_id: str | None
    error: str | None  # why the secret cannot be used, when cert_id is None


@dataclass(frozen=True)
class SecretRead(Generic[T]):
    """A Secret as one parser reads it."""

    value: T | None
    secret_type: str  # the Secret's type; "" when it is missing
    error: str | None  # why ``value`` is None
