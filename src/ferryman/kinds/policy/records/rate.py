"""The ``rateLimit`` Policy: NGINX's ``limit_req``, enforced in Lua.

NIC declares one ``limit_req_zone`` per Policy and VirtualServer (its name
holds both), so a Policy referenced by the spec and by routes of one
VirtualServer counts every request in one bucket, and another VirtualServer
using the same Policy has its own. Every rateLimit Policy of a context applies
(one ``limit_req`` each); ``dryRun``, ``logLevel`` and ``rejectCode`` are the
first one's (NIC warns about the others'). A route's limits replace the
VirtualServer's, but NGINX still inherits the server's ``limit_req_dry_run on``
into a location that does not set it (``over``).

Tiered limits (``condition``): of the Policies conditioned on one variable,
those whose ``match`` holds for its value apply (NGINX's ``map``: a string,
caselessly, or ``~``/``~*`` a regular expression; an empty value matches
nothing), or, when none does, the one marked ``default``; two defaults on one
variable fail the context (NIC's error).

P item: ``r|<dryRun 0|1>|<logLevel>|<rejectCode>|<limit>|...``, each limit
``<zone>.<rate>.<key>.<burst>.<delay>.<variable>.<match>.<default 0|1>``: the
zone ``<policy ns>/<name>/<vs ns>/<vs name>`` (base64), the rate in
thousandths of a request per second (NGINX's unit: ``1r/m`` is 16), the key
with NIC's ``${variables}`` (base64), burst, the requests served undelayed
beyond the rate (``-1``: nodelay), and the condition (base64, empty if none);
a ninth field, only when set, lists the client networks the limit does not
apply to (``access.networks_field``: ``<4|6>.<hex>.<prefix>``, comma-separated;
base64, as its dots would split the limit).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ferryman.configs.record_text import b64
from ferryman.kinds.policy.parse.policy import Policy
from ferryman.kinds.policy.parse.rate_limit import RateLimit
from ferryman.kinds.policy.records.access import networks_field
from ferryman.kinds.policy.records.base import Enforced, Owner, Step
from ferryman.kinds.policy.records.reads import PolicyReads


@dataclass(frozen=True)
class Limit:
    zone: str
    rate: int  # thousandths of a request per second
    key: str
    burst: int
    delay: int  # -1: nodelay
    variable: str = ""  # condition: an NGINX variable's name, or jwt:<claim>
    match: str = ""
    default: bool = False
    # Client networks the limit does not apply to (ingress-nginx's limit-allowlist).
    exempt: tuple[str, ...] = ()

    def field(self) -> str:
        parts = [b64(self.zone), str(self.rate), b64(self.key), str(self.burst), str(self.delay)]
        parts += [b64(self.variable), b64(self.match), "1" if self.default else "0"]
        if self.exempt:
            parts.append(b64(networks_field(self.exempt)))
        return ".".join(parts)


@dataclass(frozen=True)
class RateLimits(Enforced):
    limits: tuple[Limit, ...]
    dry_run: bool
    log_level: str
    reject_code: int
    letter = "r"

    def fields(self) -> tuple[str, ...]:
        head = ("1" if self.dry_run else "0", self.log_level, str(self.reject_code))
        return head + tuple(limit.field() for limit in self.limits)

    def over(self, outer: Enforced) -> Enforced:
        if isinstance(outer, RateLimits) and outer.dry_run and not self.dry_run:
            return replace(self, dry_run=True)
        return self


def _limit(policy: Policy, rl: RateLimit, owner: Owner) -> Limit:
    meta = policy.meta
    zone = f"{meta.namespace}/{meta.name}/{owner.vs_namespace}/{owner.vs_name}"
    # NGINX's limit_req_zone: rate * 1000 / (1 or 60), in integers.
    rate = rl.rate * 1000 // (60 if rl.per == "m" else 1)
    delay = -1 if rl.no_delay else (rl.delay or 0)
    variable = match = ""
    default = False
    if rl.condition is not None:
        default = rl.condition.default
        if rl.condition.variables:
            name, match = rl.condition.variables[0]
            variable = name.removeprefix("$")
        elif rl.condition.jwt_claim is not None:
            claim, match = rl.condition.jwt_claim
            variable = "jwt:" + claim
    return Limit(zone, rate, rl.key, rl.burst or 0, delay, variable, match, default)


def translate(
    policy: Policy, key: str, current: Enforced | None, owner: Owner, reads: PolicyReads
) -> Step:
    rl = policy.policy
    assert isinstance(rl, RateLimit)
    warnings = []
    if rl.scale:
        warnings.append(
            f"Policy {key}: rateLimit.scale is not applied: ferryman does not know how many "
            "replicas share the traffic, so the rate is each replica's"
        )
    if "${jwt_claim_" in rl.key:
        warnings.append(
            f"Policy {key}: rateLimit.key's ${{jwt_claim_...}} reads the claims of the "
            "route's jwt Policy: without one, those parts of the key are empty"
        )
    if rl.condition is not None and rl.condition.jwt_claim is not None:
        warnings.append(
            f"Policy {key}: rateLimit.condition.jwt reads the claims of the route's jwt "
            "Policy: without one, only a default tier applies"
        )
    limit = _limit(policy, rl, owner)
    if not isinstance(current, RateLimits):
        return Step(RateLimits((limit,), rl.dry_run, rl.log_level, rl.reject_code), tuple(warnings))
    for option, mine, first in (
        ("dryRun", str(rl.dry_run).lower(), str(current.dry_run).lower()),
        ("logLevel", rl.log_level, current.log_level),
        ("rejectCode", str(rl.reject_code), str(current.reject_code)),
    ):
        if mine != first:
            warnings.append(
                f"RateLimit policy {key} with limit request option {option}='{mine}' is "
                f"overridden to {option}='{first}' by the first policy reference in this context"
            )
    if limit.default and any(
        other.default and other.variable == limit.variable for other in current.limits
    ):
        warnings.append(
            f"Tiered rate-limit Policies on [{owner.namespace}/{owner.name}] contain "
            "conflicting default values"
        )
        return Step(None, tuple(warnings), error=True)
    return Step(replace(current, limits=(*current.limits, limit)), tuple(warnings))
