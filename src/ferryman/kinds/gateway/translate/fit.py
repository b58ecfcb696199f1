"""HTTPRoutes left out of the Gateway's W records for ``--max-record-bytes``.

A W record holds every route a listener serves for one name, whatever their
namespaces; a route without hostnames is in every record of its listener. So
the routes pay, not the listener: each socket with a record over the limit is
rendered without the routes with the largest shares until its records fit
(``configs/record_shares.py``), and a route left out is left out everywhere, so
that its status (Accepted False) says what is served.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from ferryman.configs.record_shares import fit
from ferryman.kinds.gateway.records.attach import ParentStatus, RouteEntry
from ferryman.kinds.gateway.records.listeners import Condition
from ferryman.kinds.gateway.records.servers import Served, fast_records, records, socket_key
from ferryman.translators.record_fit import largest, too_large

# The Gateway API's reason for a route the implementation does not serve as
# written; the message says it is its size.
TOO_LARGE_REASON = "UnsupportedValue"


@dataclass(frozen=True)
class Fit:
    served: list[Served]  # without the routes left out
    records: dict[str, str]  # the W records of ``served``
    why: dict[str, str]  # route (namespace/name) left out -> why
    fast: dict[str, str]  # the X records of ``served`` (records/servers.py)


def fit_routes(served: list[Served], limit: int) -> Fit:
    """``served`` without the routes whose shares would make a W record larger
    than ``limit``, and its records (rendered once while all fit)."""
    wanted, _ = records(served)
    big = {key.partition("/")[0] for key, value in wanted.items() if len(value.encode()) > limit}
    if not big:
        return Fit(served, wanted, {}, fast_records(served, limit))
    at = [s for s in served if socket_key(s.address, s.listener.port) in big]
    # Each route's entries, where they are (listener, name, position): a
    # render builds the tables of the routes it keeps, not all of them, so
    # the one-route renders that measure shares stay small.
    placed: dict[str, list[tuple[int, str, int, RouteEntry]]] = {}
    for li, s in enumerate(at):
        for name, entries in s.table.items():
            for pos, e in enumerate(entries):
                placed.setdefault(e.route, []).append((li, name, pos, e))
    routes = sorted(placed)

    def render(kept: Sequence[str]) -> dict[str, str]:
        tables: list[dict[str, list[tuple[int, RouteEntry]]]] = [{} for _ in at]
        for route in kept:
            for li, name, pos, e in placed[route]:
                tables[li].setdefault(name, []).append((pos, e))
        return records(
            [
                replace(s, table={n: [e for _, e in sorted(es)] for n, es in t.items()})
                for s, t in zip(at, tables, strict=True)
            ]
        )[0]

    fitted = fit(routes, render, lambda r: largest(r.values()), limit)
    where = ", ".join(sorted(big))
    why = {
        e.contributor: too_large("its rules", f"the largest Gateway record at {where}", e, limit)
        for e in fitted.excluded
    }
    kept = without(served, set(why))
    return Fit(kept, records(kept)[0], why, fast_records(kept, limit))


def without(served: Iterable[Served], routes: set[str]) -> list[Served]:
    if not routes:
        return list(served)
    # A name whose routes are all left out has no entries: as if never named
    # (it falls through to wider names), as without those routes.
    tables = [
        {n: kept for n, es in s.table.items() if (kept := [e for e in es if e.route not in routes])}
        for s in served
    ]
    return [replace(s, table=t) for s, t in zip(served, tables, strict=True)]


def not_accepted(parents: Iterable[ParentStatus], why: str) -> tuple[ParentStatus, ...]:
    """``parents`` with Accepted False for ``why`` where they were accepted."""
    refused = Condition("Accepted", False, TOO_LARGE_REASON, why)
    return tuple(
        replace(
            p,
            conditions=tuple(
                refused if c.type == "Accepted" and c.status else c for c in p.conditions
            ),
        )
        for p in parents
    )
