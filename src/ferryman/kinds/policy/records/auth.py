"""The ``basicAuth`` and ``apiKey`` Policies, with their Secrets.

``basicAuth`` is NGINX's ``auth_basic`` with the Secret's htpasswd file: a
second one in a context is ignored (NIC's warning). ``apiKey`` is NIC's
``auth_request`` to its njs check: the values of the named headers and query
arguments, concatenated, must be one of the Secret's keys (none given: 401,
wrong: 403); a second one in a context is an error. A Secret of the wrong
type, missing or invalid makes the context fail (500), with NIC's message.

P items: ``b|<realm>|<htpasswd>`` (base64 both) and
``k|<headers>|<queries>|<clients>``: header and argument names (base64,
``,``-separated), and ``<client ID, base64>:<SHA-256 of the key, hex>``
``,``-separated (the keys themselves never reach NGINX, as with NIC).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ferryman.configs.record_text import b64
from ferryman.configs.secret_state import SecretRead
from ferryman.kinds.policy.parse.policy import APIKey, BasicAuth, Policy
from ferryman.kinds.policy.records.base import Enforced, Owner, Step
from ferryman.kinds.policy.records.reads import PolicyReads
from ferryman.resources.secret_policy import (
    APIKEY_TYPE,
    HTPASSWD_TYPE,
    SUPPORTED_TYPES,
    APIKeys,
    Htpasswd,
    parse_apikey_secret,
    parse_htpasswd_secret,
)


@dataclass(frozen=True)
class Basic(Enforced):
    realm: str
    htpasswd: bytes
    letter = "b"

    def fields(self) -> tuple[str, ...]:
        return (b64(self.realm), b64(self.htpasswd))


@dataclass(frozen=True)
class Keys(Enforced):
    headers: tuple[str, ...]
    queries: tuple[str, ...]
    clients: tuple[tuple[str, str], ...]  # (client ID, SHA-256 hex)
    letter = "k"

    def fields(self) -> tuple[str, ...]:
        return (
            ",".join(b64(h) for h in self.headers),
            ",".join(b64(q) for q in self.queries),
            ",".join(f"{b64(c)}:{digest}" for c, digest in self.clients),
        )


def _secret_problem(
    what: str, key: str, where: str, read: SecretRead[object], want: str
) -> str | None:
    """NIC's message when the Secret cannot be used, else None."""
    found = read.secret_type if read.secret_type in SUPPORTED_TYPES else ""
    if found and found != want:
        return (
            f"{what} policy {key} references a secret {where} of a wrong type '{found}', "
            f"must be '{want}'"
        )
    if read.value is None:
        error = read.error if found else "secret doesn't exist or of an unsupported type"
        # NIC's words: the API key one lacks "policy".
        lead = "API Key" if what == "API Key" else f"{what} policy"
        return f"{lead} {key} references an invalid secret {where}: {error}"
    return None


def translate_basic(
    policy: Policy, key: str, current: Enforced | None, owner: Owner, reads: PolicyReads
) -> Step:
    b = policy.policy
    assert isinstance(b, BasicAuth)
    if current is not None:
        return Step(
            None,
            (
                "Multiple basic auth policies in the same context is not valid. "
                f"Basic auth policy {key} will be ignored",
            ),
        )
    ns = policy.meta.namespace
    read = reads.secret_read(ns, b.secret, parse_htpasswd_secret)
    problem = _secret_problem("Basic Auth", key, f"{ns}/{b.secret}", read, HTPASSWD_TYPE)
    if problem:
        return Step(None, (problem,), error=True)
    assert isinstance(read.value, Htpasswd)
    refused = tuple(
        f"Basic Auth policy {key} secret {ns}/{b.secret}: htpasswd {why}"
        for why in read.value.refused
    )
    return Step(Basic(b.realm, read.value.content), refused)


def translate_api_key(
    policy: Policy, key: str, current: Enforced | None, owner: Owner, reads: PolicyReads
) -> Step:
    a = policy.policy
    assert isinstance(a, APIKey)
    if current is not None:
        return Step(
            None,
            (
                "Multiple API Key policies in the same context is not valid. "
                f"API Key policy {key} will be ignored",
            ),
            error=True,
        )
    ns = policy.meta.namespace
    read = reads.secret_read(ns, a.client_secret, parse_apikey_secret)
    problem = _secret_problem("API Key", key, f"{ns}/{a.client_secret}", read, APIKEY_TYPE)
    if problem:
        return Step(None, (problem,), error=True)
    assert isinstance(read.value, APIKeys)
    clients = tuple((c, hashlib.sha256(k).hexdigest()) for c, k in read.value.clients)
    return Step(Keys(a.headers, a.queries, clients))
