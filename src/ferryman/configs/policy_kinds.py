"""Which translator each Policy kind has: the registry ``vs_policies.attach`` uses.

A kind not listed is validated but not enforced: its VirtualServers are
``Warning``, naming it. Each entry: the model class -> (the ``Enforced``
subclass its configuration is, by which ``vs_policies.effective`` tells the
kinds apart; the translator).
"""

from __future__ import annotations

from ferryman.configs import (
    policy_access,
    policy_auth,
    policy_cors,
    policy_egress_mtls,
    policy_external,
    policy_ingress_mtls,
    policy_jwt,
    policy_rate,
)
from ferryman.configs.policy_base import Enforced, Translator
from ferryman.resources.policy import (
    JWT,
    AccessControl,
    APIKey,
    BasicAuth,
    EgressMTLS,
    IngressMTLS,
)
from ferryman.resources.policy_cors import CORS
from ferryman.resources.policy_external_auth import ExternalAuth
from ferryman.resources.policy_rate_limit import RateLimit

TRANSLATORS: dict[type, tuple[type[Enforced], Translator]] = {
    AccessControl: (policy_access.Access, policy_access.translate),
    RateLimit: (policy_rate.RateLimits, policy_rate.translate),
    BasicAuth: (policy_auth.Basic, policy_auth.translate_basic),
    APIKey: (policy_auth.Keys, policy_auth.translate_api_key),
    CORS: (policy_cors.Cors, policy_cors.translate),
    JWT: (policy_jwt.JWTAuth, policy_jwt.translate),
    IngressMTLS: (policy_ingress_mtls.ClientCerts, policy_ingress_mtls.translate),
    EgressMTLS: (policy_egress_mtls.Egress, policy_egress_mtls.translate),
    ExternalAuth: (policy_external.External, policy_external.translate),
}
