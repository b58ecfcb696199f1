"""Which translator each Policy kind has: the registry ``attach.attach`` uses.

A kind not listed is validated but not enforced: its VirtualServers are
``Warning``, naming it. Each entry: the model class -> (the ``Enforced``
subclass its configuration is, by which ``attach.effective`` tells the
kinds apart; the translator).
"""

from __future__ import annotations

from ferryman.kinds.policy.parse.cors import CORS
from ferryman.kinds.policy.parse.external_auth import ExternalAuth
from ferryman.kinds.policy.parse.policy import (
    JWT,
    AccessControl,
    APIKey,
    BasicAuth,
    EgressMTLS,
    IngressMTLS,
)
from ferryman.kinds.policy.parse.rate_limit import RateLimit
from ferryman.kinds.policy.records import (
    access,
    auth,
    cors,
    egress_mtls,
    external,
    ingress_mtls,
    jwt,
    rate,
)
from ferryman.kinds.policy.records.base import Enforced, Translator

TRANSLATORS: dict[type, tuple[type[Enforced], Translator]] = {
    AccessControl: (access.Access, access.translate),
    RateLimit: (rate.RateLimits, rate.translate),
    BasicAuth: (auth.Basic, auth.translate_basic),
    APIKey: (auth.Keys, auth.translate_api_key),
    CORS: (cors.Cors, cors.translate),
    JWT: (jwt.JWTAuth, jwt.translate),
    IngressMTLS: (ingress_mtls.ClientCerts, ingress_mtls.translate),
    EgressMTLS: (egress_mtls.Egress, egress_mtls.translate),
    ExternalAuth: (external.External, external.translate),
}
