"""What every policy kind's translation shares: who attaches it, and what it gives.

A kind's translator (``configs/policy_<kind>.py``, registered in
``policy_kinds.TRANSLATORS``) turns one Policy referenced in one context (the
VirtualServer's ``spec.policies``, a route's, a subroute's) into an
``Enforced``: the configuration the data plane enforces for that kind in that
context. Several Policies of one kind in one context meet in the translator
(it gets the kind's configuration so far), because NIC's rules for that differ
per kind: access lists add up, rate limits all apply, a second basicAuth is
ignored, a second apiKey is an error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ferryman.kinds.policy.parse.policy import Policy
from ferryman.kinds.policy.records.reads import PolicyReads

# NIC's contexts (its ``specContext``, ``routeContext``, ``subRouteContext``).
SPEC, ROUTE, SUBROUTE = "spec", "route", "subroute"


@dataclass(frozen=True)
class Owner:
    """Where a policy is attached (NIC's policyOwnerDetails and policyOptions)."""

    namespace: str  # the referring resource's: a reference without namespace means it
    name: str
    vs_namespace: str  # the VirtualServer serving the host (rate-limit zones are per one)
    vs_name: str
    context: str  # SPEC, ROUTE or SUBROUTE
    path: str = "/"  # the route's path ("/" for spec)
    tls: bool = False  # the host has TLS (ingressMTLS needs it)
    ingress_class: str = ""  # the class served: a Policy naming another is not ours
    kind: str = "VirtualServer"  # the referring resource's (a ReferenceGrant's from)


class Enforced:
    """One kind's configuration in one context. Subclasses are frozen dataclasses."""

    # The letter of the V record's ``P`` item for this kind (ferryman_policy.lua
    # decodes and enforces by it).
    letter = ""

    def fields(self) -> tuple[str, ...]:
        """The P item's fields after the letter; every user string base64."""
        raise NotImplementedError

    def backends(self) -> tuple[str, ...]:
        """The Services' backend keys the data plane needs endpoints of (a kind
        that proxies, like externalAuth, to a Service)."""
        return ()

    def over(self, outer: Enforced) -> Enforced:
        """This route's configuration where the VirtualServer's ``outer`` is of the
        same kind. NGINX's inheritance makes it replace the outer one (the
        default); a kind where a directive still comes through says so here."""
        return self

    def item(self) -> str:
        return "|".join(["P", self.letter, *self.fields()])


@dataclass(frozen=True)
class Step:
    """A translator's outcome for one Policy: the kind's configuration now (None:
    as before), NIC's warnings, and whether the context fails (NIC's 500)."""

    config: Enforced | None
    warnings: tuple[str, ...] = ()
    error: bool = False


# (the Policy, its "namespace/name", the kind's configuration so far in this
# context, where it is attached, what may be read) -> the step.
Translator = Callable[[Policy, str, Enforced | None, Owner, PolicyReads], Step]
