"""Policies on a VirtualServer: which apply where, with NIC's rules.

NIC writes ``spec.policies`` into the ``server`` block and a route's
``policies`` into its ``location``, so NGINX's inheritance decides: a route
that has a policy of some kind uses its own, and the VirtualServer's for every
kind it has none of (``Enforced.over`` names the exceptions: a rate limit's
dry run). A missing or invalid Policy (absent, failing validation, of another
ingress class, or a Secret it needs unusable) makes its context answer 500
(``spec``: every request of the host; a route: that route) and the
VirtualServer ``Warning`` with NIC's message.

Use (VirtualServer and, for subroutes, VirtualServerRoute translation)::

    spec = attach(vs.policies, Owner(..., context=SPEC), reads)
    route = effective(spec, attach(r.policies, Owner(..., context=ROUTE), reads))
    items = PolicyItems(); field = items.reference(route)  # the R item's field

A VirtualServerRoute subroute uses its own ``policies`` (context SUBROUTE,
namespace the VSR's) or, when it has none, those of the VirtualServer route
handing over to it (context ROUTE), as NIC does; either way through
``effective(spec, ...)``.

The records (``kinds/virtualserver/records/virtualserver.py`` documents the V record): each
distinct configuration is one ``P|<letter>|<fields>`` item, numbered from 1;
a route names the ones it enforces, ``,``-separated (``!``: answer 500), and
``S|<numbers>`` names the VirtualServer's own (for requests no route matches;
``!``: every request of the host answers 500).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ferryman.configs.tenancy import POLICY, check
from ferryman.kinds.policy.records.base import Enforced, Owner, Step
from ferryman.kinds.policy.records.reads import PolicyReads
from ferryman.kinds.policy.records.registry import TRANSLATORS
from ferryman.resources.policy_ref import PolicyRef


@dataclass(frozen=True)
class Attached:
    """The policies of one context, one configuration per kind."""

    configs: Mapping[type[Enforced], Enforced] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    error: bool = False  # NIC's ErrorReturn: the context answers 500


NONE = Attached()


def attach(refs: Iterable[PolicyRef], owner: Owner, reads: PolicyReads) -> Attached:
    """NIC's generatePolicies: each reference in order; the first missing or
    invalid one makes the context fail (and ends the list, as in NIC)."""
    configs: dict[type[Enforced], Enforced] = {}
    warnings: list[str] = []
    for ref in refs:
        key = f"{ref.namespace}/{ref.name}"
        why = check(reads, owner.kind, owner.namespace, POLICY, ref.namespace, ref.name)
        if why is not None:  # tenant mode: as if missing, the context answers 500
            warnings.append(f"Policy {key} is refused: {why}")
            return Attached({}, tuple(warnings), True)
        policy = reads.policy(ref.namespace, ref.name)
        if policy is None or policy.ingress_class not in ("", owner.ingress_class):
            warnings.append(f"Policy {key} is missing or invalid")
            return Attached({}, tuple(warnings), True)
        found = TRANSLATORS.get(type(policy.policy))
        if found is None:
            # A kind ferryman validates but does not enforce yet (another helper's).
            warnings.append(f"Policy {key}: {type(policy.policy).__name__} is not enforced yet")
            continue
        kind, translate = found
        step: Step = translate(policy, key, configs.get(kind), owner, reads)
        warnings.extend(step.warnings)
        if step.error:
            return Attached({}, tuple(warnings), True)
        if step.config is not None:
            configs[kind] = step.config
    return Attached(configs, tuple(warnings), False)


def effective(spec: Attached, route: Attached) -> Attached:
    """What a route enforces: its own configuration per kind, else the
    VirtualServer's. The warnings are the route's own (the spec's are reported once)."""
    if spec.error or route.error:
        return Attached({}, route.warnings, True)
    configs = dict(spec.configs)
    for kind, config in route.configs.items():
        outer = spec.configs.get(kind)
        configs[kind] = config if outer is None else config.over(outer)
    return Attached(configs, route.warnings, False)


class PolicyItems:
    """The V record's P items, each distinct configuration once."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self._numbers: dict[str, int] = {}
        self.backends: set[str] = set()  # the Services the items proxy to

    def reference(self, attached: Attached, *, route_only: frozenset[str] = frozenset()) -> str:
        """A route's (or S item's) field; ``route_only``: letters left out (the
        kinds NIC writes into locations only, for requests no route matches)."""
        if attached.error:
            return "!"
        numbers = []
        for config in attached.configs.values():
            if config.letter in route_only:
                continue
            item = config.item()
            self.backends.update(config.backends())
            if item not in self._numbers:
                self.items.append(item)
                self._numbers[item] = len(self.items)
            numbers.append(str(self._numbers[item]))
        return ",".join(numbers)
