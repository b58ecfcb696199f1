"""The address each Gateway listens on, or why it has none.

With --gateway-addresses every Gateway takes one address of the pool: the one
its spec.addresses asks for, else the one its status showed (a restart keeps
it), else the lowest free. Without a pool every Gateway listens on all
addresses, and the addresses it may ask for are those the controller reports
(the Ingress status addresses). What the Gateway API asks of an implementation
that cannot give an address (GEP-820, the GatewayStaticAddresses conformance
test): an address type or value it does not support leaves the Gateway not
Accepted (UnsupportedAddress); an address it supports but cannot use leaves it
Accepted and not Programmed (AddressNotUsable), rather than being ignored.

Pure: the translator keeps the assignment between batches and passes it in.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ferryman.kinds.gateway.records.servers import ANY_ADDRESS

Key = tuple[str, str]  # a Gateway's namespace and name


@dataclass(frozen=True)
class NoAddress:
    """Why a Gateway has no address: ``accepted`` False for UnsupportedAddress."""

    accepted: bool
    reason: str
    message: str


Outcome = str | NoAddress


@dataclass(frozen=True)
class Asking:
    key: Key
    addresses: tuple[tuple[str, str], ...]  # spec.addresses as (type, value)


def unsupported(addresses: Sequence[tuple[str, str]]) -> NoAddress | None:
    for kind, value in addresses:
        if kind != "IPAddress":
            return NoAddress(
                False,
                "UnsupportedAddress",
                f'address type "{kind}" is not supported: ferryman serves Gateways on IP addresses',
            )
        try:
            ipaddress.ip_address(value)
        except ValueError:
            return NoAddress(False, "UnsupportedAddress", f'"{value}" is not an IP address')
    return None


def _not_usable(message: str) -> NoAddress:
    return NoAddress(True, "AddressNotUsable", message)


def assign(
    gateways: Sequence[Asking],
    pool: Sequence[str],
    assigned: Mapping[Key, str],
    had: Callable[[Key], str | None],
    shared: Sequence[str] = (),
) -> tuple[dict[Key, str], dict[Key, Outcome]]:
    """The new assignment and each Gateway's outcome. ``gateways`` oldest first
    (an older Gateway keeps an address a younger one asks for); ``had`` is the
    address a Gateway's status shows; ``shared`` the addresses all Gateways
    share when there is no pool."""
    outcomes: dict[Key, Outcome] = {}
    asking: list[Asking] = []
    for g in gateways:
        problem = unsupported(g.addresses)
        if problem is not None:
            outcomes[g.key] = problem
        else:
            asking.append(g)
    if not pool:
        for g in asking:
            foreign = [v for _, v in g.addresses if v not in shared]
            outcomes[g.key] = (
                _not_usable(
                    f"{foreign[0]} is not an address ferryman serves Gateways on: without "
                    "--gateway-addresses they share "
                    + (", ".join(shared) if shared else "the controller's own addresses")
                )
                if foreign
                else ANY_ADDRESS
            )
        return {}, outcomes
    in_pool = set(pool)
    wanted = {g.key: sorted({v for _, v in g.addresses}) for g in asking}
    # Assignments that still hold are kept before anything new is given out.
    kept = {
        k: a
        for k, a in assigned.items()
        if k in wanted and (wanted[k] == [a] or (not wanted[k] and a in in_pool))
    }
    owner = {a: k for k, a in kept.items()}
    for g in asking:
        if g.key in kept:
            outcomes[g.key] = kept[g.key]
            continue
        requested = wanted[g.key]
        if len(requested) > 1:
            outcomes[g.key] = _not_usable(
                f"ferryman gives a Gateway one address; {len(requested)} are asked for"
            )
            continue
        if requested:
            (address,) = requested
            if address not in in_pool:
                outcomes[g.key] = _not_usable(f"{address} is not in --gateway-addresses")
            elif address in owner:
                namespace, name = owner[address]
                outcomes[g.key] = _not_usable(f"{address} is in use by Gateway {namespace}/{name}")
            else:
                kept[g.key] = outcomes[g.key] = address
                owner[address] = g.key
            continue
        previous = had(g.key)
        if previous is not None and previous in in_pool and previous not in owner:
            choice: str | None = previous
        else:
            choice = next((a for a in pool if a not in owner), None)
        if choice is None:
            outcomes[g.key] = NoAddress(
                True, "AddressNotAssigned", "no address of --gateway-addresses is free"
            )
        else:
            kept[g.key] = outcomes[g.key] = choice
            owner[choice] = g.key
    return kept, outcomes
