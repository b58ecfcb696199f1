"""Which resources read which objects: one index for every kind.

A translator (Ingress, VirtualServer, and each kind after them) reads the
objects it refers to (Secrets, Policies, VirtualServerRoutes...) through
``reads.Reads``, which records every object asked for, found or not; the
controller then ``declare``\\ s that set here. When one of those objects
changes, ``users`` names the resources to translate again. An object that was
missing is still recorded, so creating it later brings its users back.

A read of every object of a kind in a namespace (a label selector) is declared
with ``ANY`` as the name, and ``users`` of any such object includes it; a read
across all namespaces (NIC's ``routeSelector``) has ``ANY`` as the namespace too.
"""

from __future__ import annotations

from collections.abc import Iterable

from ferryman.resources.meta import ObjectRef

ANY = "*"


class Dependencies:
    def __init__(self) -> None:
        self._uses: dict[ObjectRef, frozenset[ObjectRef]] = {}
        self._users: dict[ObjectRef, set[ObjectRef]] = {}

    def declare(self, user: ObjectRef, used: Iterable[ObjectRef]) -> frozenset[ObjectRef]:
        """``user`` now reads exactly ``used``; returns the objects it stopped reading."""
        new = frozenset(used)
        old = self._uses.pop(user, frozenset())
        if new:
            self._uses[user] = new
        for ref in old - new:
            users = self._users[ref]
            users.discard(user)
            if not users:
                del self._users[ref]
        for ref in new - old:
            self._users.setdefault(ref, set()).add(user)
        return old - new

    def users(self, used: ObjectRef) -> set[ObjectRef]:
        """Every resource that read ``used``, or all of its kind in its namespace or in all."""
        found: set[ObjectRef] = set()
        for ref in (used, used._replace(name=ANY), used._replace(namespace=ANY, name=ANY)):
            found |= self._users.get(ref, set())
        return found

    def uses(self, user: ObjectRef) -> frozenset[ObjectRef]:
        return self._uses.get(user, frozenset())

    def used(self, ref: ObjectRef) -> bool:
        return ref in self._users
