"""The ``jwt`` Policy: a JSON Web Token checked per request (ferryman_jwt.lua).

NIC offers it with NGINX Plus only (``auth_jwt``, ``auth_jwt_key_file``);
ferryman checks the token itself, on open-source NGINX, against the key set of
a Secret of type ``nginx.org/jwk`` (``resources/secret_jwk.py``). The keys
travel in the V record, so a changed Secret or Policy is a push. Keys from a
URL (``jwksURI``) are refused when the Policy is parsed.
"""

from __future__ import annotations

from dataclasses import dataclass

from ferryman.configs.record_text import b64, unquote
from ferryman.kinds.policy.parse.policy import JWT, Policy
from ferryman.kinds.policy.records.base import Enforced, Owner, Step
from ferryman.kinds.policy.records.reads import PolicyReads
from ferryman.resources.secret_jwk import JWK_TYPE, KeySet, parse_jwk_secret


@dataclass(frozen=True)
class JWTAuth(Enforced):
    realm: str  # as NGINX would hold NIC's quoted realm
    token: str  # "$http_x", "$arg_x", "$cookie_x"; "": the Authorization header
    keys: str  # the key set's record (``KeySet.record``)
    letter = "j"

    def fields(self) -> tuple[str, ...]:
        return (b64(self.realm), b64(self.token), b64(self.keys))


def translate(
    policy: Policy, key: str, current: Enforced | None, owner: Owner, reads: PolicyReads
) -> Step:
    j = policy.policy
    assert isinstance(j, JWT)
    if current is not None:
        message = (
            f"Multiple jwt policies in the same context is not valid. "
            f"JWT policy {key} will be ignored"
        )
        return Step(None, (message,))
    namespace = policy.meta.namespace
    secret_key = f"{namespace}/{j.secret}"
    read = reads.secret_read(namespace, j.secret, parse_jwk_secret)
    if read.secret_type and read.secret_type != JWK_TYPE:
        message = (
            f"JWT policy {key} references a secret {secret_key} of a wrong type "
            f"'{read.secret_type}', must be '{JWK_TYPE}'"
        )
        return Step(None, (message,), error=True)
    if not isinstance(read.value, KeySet):
        message = f"JWT policy {key} references an invalid secret {secret_key}: {read.error}"
        return Step(None, (message,), error=True)
    return Step(JWTAuth(unquote(j.realm), j.token, read.value.record()))
