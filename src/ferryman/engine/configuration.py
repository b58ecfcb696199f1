"""Which accepted resource owns each host: the pure state behind every sync.

Ownership follows NIC: one owner per host, the oldest resource wins
(creationTimestamp, then namespace/name), across kinds: an Ingress and a
VirtualServer claiming one host compete as two Ingresses do. A resource without a timestamp
(common in manifests mode) counts as newer than every resource that has one,
and such resources are ordered by namespace/name alone. Host "" stands for the
catch-all (rules without a host, or a lone defaultBackend).

With a ``HostPolicy`` (``--allowed-host-suffixes``, opt-in) a namespace claims only
the hosts its suffixes cover; the others are reported, never claimed.

A wildcard ``*.suffix`` covers one more label, but an exact host under it wins
every request for that name, whoever owns it; ``shadowed`` tells the wildcard's
owner which of its names another namespace serves.

The class keeps its own state but does no I/O and reads no clock; each change
returns the set of Ingresses whose served hosts (or shadowed names) may have
changed, so the caller re-renders exactly those.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Protocol

from ferryman.resources.meta import Meta, ObjectRef

AgeKey = tuple[bool, str, str, str, str]


class Claimant(Protocol):
    """What claims hosts, whatever its kind: an Ingress (its rules' hosts), a
    VirtualServer (its host), a TLS passthrough TransportServer (its SNI name)."""

    @property
    def kind(self) -> str: ...

    @property
    def meta(self) -> Meta: ...

    def hosts(self) -> tuple[str, ...]: ...

    @property
    def variety(self) -> str:
        """What the kind's resource gauge tells its resources apart by ("":
        nothing; an Ingress: its mergeable type)."""
        ...


def age_key(res: Claimant) -> AgeKey:
    ts = res.meta.creation_timestamp
    # The kind last: only two resources of different kinds with one name tie before it.
    return (ts is None, ts or "", res.meta.namespace, res.meta.name, res.kind)


def ingress_ref(res: Claimant) -> ObjectRef:
    return ObjectRef(res.kind, res.meta.namespace, res.meta.name)


class HostPolicy:
    """Which hosts each namespace may claim: a host equal to one of its suffixes or
    under it (``*.suffix`` counts as under ``suffix``); ``*`` allows every host and
    the catch-all. A namespace without suffixes may claim none."""

    def __init__(self, suffixes: Iterable[tuple[str, str]]) -> None:
        self._suffixes: dict[str, set[str]] = {}
        for namespace, suffix in suffixes:
            self._suffixes.setdefault(namespace, set()).add(suffix)

    def allows(self, namespace: str, host: str) -> bool:
        suffixes = self._suffixes.get(namespace, set())
        if "*" in suffixes:
            return True
        name = host.removeprefix("*.")
        return bool(name) and any(name == s or name.endswith("." + s) for s in suffixes)


class Configuration:
    def __init__(self, policy: HostPolicy | None = None) -> None:
        self._policy = policy
        self._ingresses: dict[ObjectRef, Claimant] = {}
        self._claims: dict[str, set[ObjectRef]] = {}
        self._owner: dict[str, ObjectRef] = {}
        # Exact hosts with an owner, by the wildcard that covers them ("*.suffix").
        self._under: dict[str, set[str]] = {}
        # Claimants by (kind, variety): the resource gauges, set at every
        # flush, read these instead of counting every claimant each time.
        self._tally: Counter[tuple[str, str]] = Counter()

    def __len__(self) -> int:
        return len(self._ingresses)

    def allows(self, namespace: str, host: str) -> bool:
        """Whether ``namespace`` may serve ``host``: always without a host policy."""
        return self._policy is None or self._policy.allows(namespace, host)

    def get(self, ref: ObjectRef) -> Claimant | None:
        return self._ingresses.get(ref)

    def count(self, kind: str) -> int:
        return sum(n for (k, _), n in self._tally.items() if k == kind)

    def tally(self, kind: str) -> dict[str, int]:
        """How many claimants of ``kind`` there are by variety (``Claimant.variety``)."""
        return {t: n for (k, t), n in self._tally.items() if k == kind and n}

    def refs(self) -> list[ObjectRef]:
        return list(self._ingresses)

    def _claimable(self, ing: Claimant) -> list[str]:
        policy = self._policy
        hosts = ing.hosts()
        return [h for h in hosts if policy.allows(ing.meta.namespace, h)] if policy else list(hosts)

    def denied_hosts(self, ref: ObjectRef) -> list[str]:
        """Hosts ``ref`` asks for that the host policy does not allow its namespace."""
        ing = self._ingresses.get(ref)
        if ing is None:
            return []
        claimable = set(self._claimable(ing))
        return [h for h in ing.hosts() if h not in claimable]

    def upsert(self, ing: Claimant) -> set[ObjectRef]:
        ref = ingress_ref(ing)
        old = self._ingresses.get(ref)
        self._ingresses[ref] = ing
        if old is not None:
            self._tally[_tag(ref, old)] -= 1
        self._tally[_tag(ref, ing)] += 1
        old_hosts = set(self._claimable(old)) if old else set()
        new_hosts = set(self._claimable(ing))
        for host in old_hosts - new_hosts:
            self._claims[host].discard(ref)
        for host in new_hosts:
            self._claims.setdefault(host, set()).add(ref)
        return {ref} | self._reelect(old_hosts | new_hosts)

    def delete(self, ref: ObjectRef) -> set[ObjectRef]:
        old = self._ingresses.pop(ref, None)
        if old is None:
            return set()
        self._tally[_tag(ref, old)] -= 1
        hosts = set(self._claimable(old))
        for host in hosts:
            self._claims[host].discard(ref)
        return {ref} | self._reelect(hosts)

    def _reelect(self, hosts: set[str]) -> set[ObjectRef]:
        affected: set[ObjectRef] = set()
        for host in hosts:
            claims = self._claims.get(host, set())
            before = self._owner.get(host)
            wildcard = covering_wildcard(host)
            if claims:
                after = min(claims, key=lambda r: age_key(self._ingresses[r]))
                self._owner[host] = after
                affected.add(after)
                if wildcard:
                    self._under.setdefault(wildcard, set()).add(host)
            else:
                self._claims.pop(host, None)
                self._owner.pop(host, None)
                if wildcard and (under := self._under.get(wildcard)) is not None:
                    under.discard(host)
                    if not under:
                        del self._under[wildcard]
            if before is not None and before in self._ingresses:
                affected.add(before)
            if wildcard and (shadowed := self._owner.get(wildcard)) is not None:
                affected.add(shadowed)
        return affected

    def owner(self, host: str) -> ObjectRef | None:
        return self._owner.get(host)

    def owned_hosts(self, ref: ObjectRef) -> tuple[str, ...]:
        ing = self._ingresses.get(ref)
        if ing is None:
            return ()
        return tuple(h for h in ing.hosts() if self._owner.get(h) == ref)

    def shadowed(self, ref: ObjectRef) -> dict[str, ObjectRef]:
        """Names under ``ref``'s wildcards that another namespace's exact host
        serves instead, with that host's owner."""
        found: dict[str, ObjectRef] = {}
        for wildcard in self.owned_hosts(ref):
            for host in self._under.get(wildcard, ()):
                owner = self._owner[host]
                if owner.namespace != ref.namespace:
                    found[host] = owner
        return found

    def lost_hosts(self, ref: ObjectRef) -> dict[str, ObjectRef]:
        """Hosts ``ref`` asks for but another resource owns, with the winner."""
        ing = self._ingresses.get(ref)
        if ing is None:
            return {}
        return {h: o for h in self._claimable(ing) if (o := self._owner[h]) != ref}


def covering_wildcard(host: str) -> str | None:
    """The wildcard that would serve an exact ``host`` ("a.b.c" -> "*.b.c")."""
    if host.startswith("*.") or "." not in host:
        return None
    return "*." + host.partition(".")[2]


def _tag(ref: ObjectRef, claimant: Claimant) -> tuple[str, str]:
    return ref.kind, claimant.variety
