"""ListenerSets merged into their Gateways, and the statuses that follow (pure).

The rules (gateway-api v1.6, apis/v1 listenerset_types.go, gateway_types.go
AllowedListeners, GEP-1713):

- a ListenerSet attaches to the Gateway its parentRef names when that Gateway
  is this class's and its ``allowedListeners.namespaces.from`` admits the
  ListenerSet's namespace (None, the default: none; Same; Selector; All); else
  it is not Accepted (NotAllowed);
- its listeners then join the Gateway's, served exactly as the Gateway's own
  (its address, its sockets, its records); a listener that would conflict with
  one before it (the Gateway's own first, then the ListenerSets oldest first,
  then by namespace/name) is left out, Conflicted with the reason the
  Gateway's listeners use (ProtocolConflict, HostnameConflict), and the one
  before it keeps serving: a ListenerSet never takes a port or hostname away;
- a merged listener's name is ``namespace/name/listener`` within the Gateway
  (no section name holds a "/", so it never meets the Gateway's own nor
  another ListenerSet's); its namespace is the ListenerSet's for allowedRoutes
  Same and certificateRefs (granted to the ListenerSet kind);
- a ListenerSet is Accepted and Programmed while one of its listeners is
  (else ListenersNotValid), and not while its Gateway is not
  (ParentNotAccepted); the Gateway's status lists its own listeners only, its
  conditions are theirs, and ``attachedListenerSets`` counts the Accepted
  ListenerSets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from ferryman.kinds.gateway.parse.gateway_api import Gateway, Listener, ListenerOrigin
from ferryman.kinds.gateway.parse.listener_set import ListenerSet, section
from ferryman.kinds.gateway.records.listeners import (
    Condition,
    GatewayStatus,
    ListenerStatus,
    conflict_of,  # the Gateway's own rule, so both sides conflict alike
    gateway_conditions,
)
from ferryman.kinds.gateway.records.selectors import NamespaceLabels, namespace_allowed

Key = tuple[str, str]


@dataclass(frozen=True)
class Placed:
    """A ListenerSet of one of this class's Gateways, as it was merged."""

    listener_set: ListenerSet
    gateway: Key
    allowed: bool
    # Its listeners as merged (in its order), and those left out with the reason.
    merged: tuple[Listener, ...] = ()
    left_out: tuple[tuple[Listener, str], ...] = ()


@dataclass(frozen=True)
class Merged:
    gateways: list[Gateway]  # in the order given, with their ListenerSets' listeners
    placed: list[Placed]  # oldest first
    parents: dict[Key, Key]  # each placed ListenerSet -> its Gateway (attach's listener_sets)


@dataclass(frozen=True)
class SetStatus:
    accepted: Condition
    programmed: Condition
    listeners: tuple[ListenerStatus, ...]


def _age(ls: ListenerSet) -> tuple[str, str, str]:
    return (ls.meta.creation_timestamp or "", ls.meta.namespace, ls.meta.name)


def merge(
    gateways: Sequence[Gateway],
    listener_sets: Iterable[ListenerSet],
    namespace_labels: NamespaceLabels,
) -> Merged:
    by_gateway: dict[Key, list[ListenerSet]] = {}
    for ls in sorted(listener_sets, key=_age):
        by_gateway.setdefault((ls.parent_namespace, ls.parent_name), []).append(ls)
    out = Merged([], [], {})
    for g in gateways:
        key = (g.meta.namespace, g.meta.name)
        listeners = list(g.listeners)
        for ls in by_gateway.get(key, ()):
            ls_key = (ls.meta.namespace, ls.meta.name)
            out.parents[ls_key] = key
            allowed = namespace_allowed(
                g.listener_sets_from,
                g.listener_sets_selector,
                g.meta.namespace,
                ls.meta.namespace,
                namespace_labels,
            )
            if not allowed:
                out.placed.append(Placed(ls, key, False))
                continue
            merged, left_out = [], []
            for lst in ls.listeners:
                m = _merged(ls, lst)
                if (why := conflict_of(replace(g, listeners=(*listeners, m)), m)) is not None:
                    left_out.append((m, why))
                    continue
                listeners.append(m)
                merged.append(m)
            out.placed.append(Placed(ls, key, True, tuple(merged), tuple(left_out)))
        out.gateways.append(replace(g, listeners=tuple(listeners)))
    return out


def _merged(ls: ListenerSet, lst: Listener) -> Listener:
    namespace, name = ls.meta.namespace, ls.meta.name
    return replace(
        lst,
        name=f"{namespace}/{name}/{lst.name}",
        origin=ListenerOrigin(namespace, name, lst.name),
        # Spelled out: the data plane's certificate lookups default to the Gateway's.
        certificates=tuple(
            replace(c, namespace=c.namespace or namespace) for c in lst.certificates
        ),
    )


def split(
    merged: Merged,
    statuses: dict[Key, GatewayStatus],
    alone: Callable[[Gateway, Listener], ListenerStatus],
) -> tuple[dict[Key, SetStatus], dict[Key, int]]:
    """Each placed ListenerSet's status, and each Gateway's attachedListenerSets;
    ``statuses`` (attach's) get their conditions from the Gateways' own
    listeners (they keep every listener: the merged ones are served);
    ``alone(gateway, listener)``: a listener's status as its protocol and
    references make it (records/listeners.py), for those left out."""
    gateways = {(g.meta.namespace, g.meta.name): g for g in merged.gateways}
    for key, status in list(statuses.items()):
        own = tuple(s for s in status.listeners if "/" not in s.name)
        statuses[key] = GatewayStatus(gateway_conditions(own), status.listeners)
    out: dict[Key, SetStatus] = {}
    attached: dict[Key, int] = {}
    for p in merged.placed:
        ls = p.listener_set
        ls_key = (ls.meta.namespace, ls.meta.name)
        if not p.allowed:
            why = f"Gateway {p.gateway[0]}/{p.gateway[1]}'s allowedListeners do not admit it"
            out[ls_key] = _not("NotAllowed", why)
            continue
        by_name = {s.name: s for s in statuses[p.gateway].listeners}
        entries = {section(m): replace(by_name[m.name], name=section(m)) for m in p.merged}
        gateway = gateways[p.gateway]
        for m, why in p.left_out:
            alone_status = alone(replace(gateway, listeners=(m,)), m)
            entries[section(m)] = _conflicted(section(m), why, alone_status)
        listeners = tuple(entries[lst.name] for lst in ls.listeners)
        gateway_accepted = statuses[p.gateway].conditions[0].status
        if not gateway_accepted:
            set_status = _not("ParentNotAccepted", "its Gateway is not accepted", listeners)
        elif any(_programmed(s) for s in listeners):
            set_status = SetStatus(
                Condition("Accepted", True, "Accepted"),
                Condition("Programmed", True, "Programmed"),
                listeners,
            )
            attached[p.gateway] = attached.get(p.gateway, 0) + 1
        else:
            set_status = _not("ListenersNotValid", "no listener is valid", listeners)
        out[ls_key] = set_status
    return out, attached


def _not(reason: str, message: str, listeners: tuple[ListenerStatus, ...] = ()) -> SetStatus:
    return SetStatus(
        Condition("Accepted", False, reason, message),
        Condition("Programmed", False, reason, message),
        listeners,
    )


def _programmed(s: ListenerStatus) -> bool:
    return any(c.type == "Programmed" and c.status for c in s.conditions)


def _conflicted(name: str, reason: str, alone: ListenerStatus) -> ListenerStatus:
    """A left-out listener: its route kinds and references as they are, not
    Accepted nor Programmed for its conflict."""
    message = "conflicts with a listener of its Gateway or of an older ListenerSet"
    return ListenerStatus(
        name,
        alone.supported_kinds,
        0,
        (
            Condition("Accepted", False, reason, message),
            *(c for c in alone.conditions if c.type == "ResolvedRefs"),
            Condition("Conflicted", True, reason, message),
            Condition("Programmed", False, reason, message),
        ),
    )
