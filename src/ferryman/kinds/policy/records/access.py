"""The ``accessControl`` Policy: NGINX's allow/deny by the client's address.

NIC writes ``allow <cidr>; ... deny all;`` or ``deny <cidr>; ... allow all;``;
several Policies in one context add their lists up, and when both kinds meet
the allow rules come first, so the deny ones never decide (NIC's warning says
so). The client's address is NGINX's ``$remote_addr``.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ferryman.kinds.policy.parse.policy import AccessControl, Policy
from ferryman.kinds.policy.records.base import Enforced, Owner, Step
from ferryman.kinds.policy.records.reads import PolicyReads

if TYPE_CHECKING:  # attach imports the translators, this module among them
    from ferryman.kinds.policy.records.attach import Attached

_BOTH = (
    "AccessControl policy (or policies) with deny rules is overridden by policy (or policies) "
    "with allow rules"
)


@dataclass(frozen=True)
class Access(Enforced):
    allow: tuple[str, ...]
    deny: tuple[str, ...]
    letter = "a"

    def rules(self) -> tuple[bool, tuple[str, ...]]:
        """(whether the networks are allowed, the networks): allow rules decide
        when there are any (NIC's "deny all" follows them), else "allow all"
        follows the deny ones."""
        return (True, self.allow) if self.allow else (False, self.deny)

    def fields(self) -> tuple[str, ...]:
        allow, networks = self.rules()
        return ("allow" if allow else "deny", networks_field(networks))


def network_text(text: str) -> str:
    """``<4|6>.<network address, hex>.<prefix length>``: NGINX masks an address's
    host bits (``10.0.0.1/8`` is ``10.0.0.0/8``), and a plain address is /32 or /128."""
    net = ipaddress.ip_network(text, strict=False)
    return f"{net.version}.{net.network_address.packed.hex()}.{net.prefixlen}"


def module_field(access: Access) -> str:
    """The F record's <access> (dataplane/module/ngx_http_ferryman_access.c):
    whether the networks are allowed, their count, then each network."""
    allow, networks = access.rules()
    return " ".join([str(int(allow)), str(len(networks)), *map(network_text, networks)])


def module_access(attached: Attached) -> str | None:
    """``module_field`` of policies that are an accessControl only, else None."""
    access = attached.configs.get(Access)
    if attached.error or len(attached.configs) != 1 or not isinstance(access, Access):
        return None
    return module_field(access)


def networks_field(networks: tuple[str, ...]) -> str:
    """Networks as the data plane reads them (ferryman_policy_access.lua's)."""
    return ",".join(network_text(n) for n in networks)


def translate(
    policy: Policy, key: str, current: Enforced | None, owner: Owner, reads: PolicyReads
) -> Step:
    a = policy.policy
    assert isinstance(a, AccessControl)
    before = current if isinstance(current, Access) else Access((), ())
    allow = before.allow + (a.networks if a.action == "allow" else ())
    deny = before.deny + (a.networks if a.action == "deny" else ())
    warnings = (_BOTH,) if allow and deny else ()
    return Step(Access(allow, deny), warnings)
