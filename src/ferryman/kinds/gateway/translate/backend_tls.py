"""BackendTLSPolicies in the Gateway translation: which backends the
attached routes reach from which Gateways, their policies resolved
(records/backend_tls.py), and each route entry marked with its backends' TLS
(in place, as records/backend_protocols.py marks h2c), so that a policy
change is a new W record, never a reload."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import replace
from typing import Any

from ferryman.kinds.gateway.parse.backend_tls import BackendTLSPolicy
from ferryman.kinds.gateway.records.attach import RouteEntry
from ferryman.kinds.gateway.records.backend_tls import Backend, ObjectGet, resolve

Table = MutableMapping[Any, dict[str, list[RouteEntry]]]


def apply_backend_tls(
    table: Table,
    policies: Iterable[BackendTLSPolicy],
    service: ObjectGet,
    config_map: ObjectGet,
    controller: str,
) -> dict[tuple[str, str], Mapping[str, Any]]:
    """Mark ``table``'s entries with their backends' TLS; each policy's wanted
    status by (namespace, name)."""
    used: dict[Backend, set[tuple[str, str]]] = {}
    for (gw_namespace, gw_name, _), by_host in table.items():
        for entries in by_host.values():
            for e in entries:
                for namespace, name, port, _ in e.backends:
                    if name is not None:
                        used.setdefault((namespace, name, port), set()).add((gw_namespace, gw_name))
    state = resolve(policies, used, service, config_map, controller)
    if state.by_backend:
        for by_host in table.values():
            for entries in by_host.values():
                for i, e in enumerate(entries):
                    marks = tuple(
                        None if name is None else state.by_backend.get((namespace, name, port))
                        for namespace, name, port, _ in e.backends
                    )
                    if any(m is not None for m in marks):
                        entries[i] = replace(e, tls=marks)
    return state.statuses
