"""BackendTLSPolicies in the Gateway translation: which backends the
attached routes reach from which Gateways, their policies resolved
(records/backend_tls.py), and each route entry marked with its backends' TLS
and its Gateway's backend client certificate (in place, as
records/backend_protocols.py marks h2c), so that a policy, ConfigMap or
Secret change is a new W record, never a reload."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import replace
from typing import Any

from ferryman.engine.reads import Reads
from ferryman.kinds.gateway.parse.backend_tls import BackendTLSPolicy
from ferryman.kinds.gateway.parse.gateway_api import Gateway
from ferryman.kinds.gateway.records.attach import RouteEntry
from ferryman.kinds.gateway.records.backend_client_cert import PairRead
from ferryman.kinds.gateway.records.backend_tls import Backend, ObjectGet, resolve
from ferryman.resources.meta import ObjectRef
from ferryman.resources.secret import TLSPair, parse_tls_secret

Table = MutableMapping[Any, dict[str, list[RouteEntry]]]


def apply_backend_tls(
    table: Table,
    policies: Iterable[BackendTLSPolicy],
    service: ObjectGet,
    config_map: ObjectGet,
    controller: str,
    client: Mapping[tuple[str, str], TLSPair],
) -> dict[tuple[str, str], Mapping[str, Any]]:
    """Mark ``table``'s entries with their backends' TLS (with ``client``,
    each Gateway's client certificate, on its own entries); each policy's
    wanted status by (namespace, name)."""
    used: dict[Backend, set[tuple[str, str]]] = {}
    for (gw_namespace, gw_name, _), by_host in table.items():
        for entries in by_host.values():
            for e in entries:
                for namespace, name, port, _ in e.backends:
                    if name is not None:
                        used.setdefault((namespace, name, port), set()).add((gw_namespace, gw_name))
    state = resolve(policies, used, service, config_map, controller)
    if state.by_backend:
        for (gw_namespace, gw_name, _), by_host in table.items():
            pair = client.get((gw_namespace, gw_name))
            for entries in by_host.values():
                for i, e in enumerate(entries):
                    marks = tuple(
                        None if name is None else state.by_backend.get((namespace, name, port))
                        for namespace, name, port, _ in e.backends
                    )
                    if pair is not None:
                        marks = tuple(
                            m if m is None else replace(m, cert=pair.chain, key=pair.key)
                            for m in marks
                        )
                    if any(m is not None for m in marks):
                        entries[i] = replace(e, tls=marks)
    return state.statuses


def with_resolved_refs(
    statuses: MutableMapping[ObjectRef, Mapping[str, Any]],
    gateways: Iterable[Gateway],
    resolved: Mapping[tuple[str, str], tuple[bool, str, str]],
) -> None:
    """Each Gateway naming a backend client certificate gets its
    ``ResolvedRefs`` condition (records/backend_client_cert.py), in place."""
    for g in gateways:
        key = (g.meta.namespace, g.meta.name)
        ref = ObjectRef("Gateway", *key)
        body = statuses.get(ref)
        if key not in resolved or body is None:
            continue
        ok, reason, message = resolved[key]
        condition = {"type": "ResolvedRefs", "status": "True" if ok else "False",
                     "reason": reason, "message": message,
                     "observedGeneration": g.meta.generation}  # fmt: skip
        statuses[ref] = {**body, "conditions": [*body.get("conditions", []), condition]}


def pair_reader(reads: Reads) -> PairRead:
    """A Secret's TLS pair as the Gateway's client certificate, or why not."""

    def read(namespace: str, name: str) -> TLSPair | str:
        got = reads.secret_read(namespace, name, parse_tls_secret)
        if not got.secret_type:
            return "it does not exist"
        if got.value is None:
            return got.error or "it is not a usable kubernetes.io/tls Secret"
        assert isinstance(got.value, TLSPair)
        return got.value

    return read
