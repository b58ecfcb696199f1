"""Mergeable Ingresses (``nginx.org/mergeable-ingress-type``), NIC's rules.

A master (one rule: the host, no paths; TLS and the server's settings) and
minions (one rule for the master's host, paths, no TLS), in any namespace,
make one host: the master's server with the minions' paths as locations
(NIC's internal/k8s/configuration.go ``buildMinionConfigs``,
internal/configs/annotations.go):

- a master ignores the annotations that are per location only
  (``MASTER_DENYLIST``), a minion those that are per server
  (``MINION_DENYLIST``); ferryman says so in a Warning (NIC logs it);
- a minion inherits the master's value of each annotation of
  ``MINION_INHERITED`` it does not set itself;
- a path two minions share belongs to the older (creationTimestamp, then
  namespace/name); the other is told "path /p is taken by another resource";
- a minion without a valid master for its host: ``NoIngressMasterFound``,
  "Ingress master is invalid or doesn't exist".

Which minions exist is read through ``reads.Reads.mergeable`` (by host), so a
minion's change translates its master again and a master's its minions.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ferryman.configs.tenancy import HostRules, host_denied
from ferryman.kinds.ingress.parse.annotations import PREFIX
from ferryman.kinds.ingress.parse.ingress import Ingress, Rule

MASTER_DENYLIST = frozenset(
    PREFIX + k
    for k in (
        "rewrites",
        "ssl-services",
        "grpc-services",
        "websocket-services",
        "sticky-cookie-services",
        "use-cluster-ip",
    )
) | {"nginx.com/sticky-cookie-services", "nginx.com/health-checks"}
MINION_DENYLIST = frozenset(
    PREFIX + k
    for k in (
        "proxy-hide-headers",
        "proxy-pass-headers",
        "redirect-to-https",
        "ssl-redirect",
        "http-redirect-code",
        "hsts",
        "hsts-max-age",
        "hsts-include-subdomains",
        "server-tokens",
        "listen-ports",
        "listen-ports-ssl",
        "server-snippets",
        "ssl-ciphers",
        "ssl-prefer-server-ciphers",
        "app-root",
    )
) | {"ingress.kubernetes.io/ssl-redirect"}
MINION_INHERITED = frozenset(
    PREFIX + k
    for k in (
        "proxy-connect-timeout",
        "proxy-read-timeout",
        "proxy-send-timeout",
        "client-max-body-size",
        "proxy-buffering",
        "proxy-buffers",
        "proxy-buffer-size",
        "proxy-busy-buffers-size",
        "proxy-max-temp-file-size",
        "upstream-zone-size",
        "location-snippets",
        "lb-method",
        "keepalive",
        "max-fails",
        "max-conns",
        "fail-timeout",
        "limit-req-rate",
        "limit-req-key",
        "limit-req-zone-size",
        "limit-req-delay",
        "limit-req-no-delay",
        "limit-req-burst",
        "limit-req-dry-run",
        "limit-req-log-level",
        "limit-req-reject-code",
        "limit-req-scale",
    )
)
NO_MASTER = "NoIngressMasterFound"
NO_MASTER_MESSAGE = "Ingress master is invalid or doesn't exist"


def _age(ing: Ingress) -> tuple[bool, str, str, str]:
    ts = ing.meta.creation_timestamp
    return (ts is None, ts or "", ing.meta.namespace, ing.meta.name)


def key_of(ing: Ingress) -> str:
    return f"{ing.meta.namespace}/{ing.meta.name}"


def filtered(ing: Ingress, denied: frozenset[str]) -> tuple[dict[str, str], list[str]]:
    """``ing``'s annotations less ``denied``, and a warning naming those left out."""
    kept = {k: v for k, v in ing.meta.annotations.items() if k not in denied}
    removed = sorted(k for k in ing.meta.annotations if k in denied)
    kind = ing.mergeable or "regular"
    warnings = (
        [f"annotations {', '.join(removed)} are not allowed on a {kind} Ingress: ignored"]
        if removed
        else []
    )
    return kept, warnings


SET_HEADERS = PREFIX + "proxy-set-headers"


def minion_annotations(minion: Ingress, master: Ingress) -> tuple[dict[str, str], list[str]]:
    """The annotations a minion is served with: its own allowed ones, then the
    master's inherited ones it does not set; proxy-set-headers combined (NIC:
    the master's headers on every minion path, the minion's added, its value
    winning for a name both set)."""
    own, warnings = filtered(minion, MINION_DENYLIST)
    for k, v in master.meta.annotations.items():
        if k in MINION_INHERITED and k not in own:
            own[k] = v
    if (headers := master.meta.annotations.get(SET_HEADERS)) is not None:
        own[SET_HEADERS] = combined_headers(headers, own.get(SET_HEADERS))
    return own, warnings


def combined_headers(master: str, minion: str | None) -> str:
    """The master's ``proxy-set-headers`` entries whose names (case aside) the
    minion's do not set, then the minion's (the entries are checked after, as
    the minion's own value would be)."""
    if minion is None:
        return master

    def name(entry: str) -> str:
        return entry.partition(":")[0].strip().lower()

    theirs = {name(e) for e in minion.split(",")}
    kept = [e for e in master.split(",") if name(e) not in theirs]
    return ",".join([*kept, minion]) if kept else minion


@dataclass(frozen=True)
class Merged:
    """A master's minions with the paths they keep, and each minion's warnings."""

    minions: tuple[Ingress, ...]  # rules reduced to the paths each serves
    warnings: dict[str, list[str]]  # minion namespace/name -> warnings


def merge(host: str, candidates: list[Ingress]) -> Merged:
    """NIC's buildMinionConfigs: minions of ``host`` by namespace/name, each
    path to the oldest minion naming it."""
    minions = sorted(
        (c for c in candidates if c.mergeable == "minion" and c.rules[0].host == host),
        key=key_of,
    )
    holders: dict[str, Ingress] = {}
    warnings: dict[str, list[str]] = {}
    for m in minions:
        for p in m.rules[0].paths:
            holder = holders.get(p.path)
            if holder is None or _age(m) < _age(holder):
                if holder is not None:
                    warnings.setdefault(key_of(holder), []).append(
                        f"path {p.path} is taken by another resource"
                    )
                holders[p.path] = m
            else:
                warnings.setdefault(key_of(m), []).append(
                    f"path {p.path} is taken by another resource"
                )
    kept = []
    for m in minions:
        paths = tuple(p for p in m.rules[0].paths if holders.get(p.path) is m)
        kept.append(replace(m, rules=(Rule(host, paths),)))
    return Merged(tuple(kept), warnings)


def master_of(host: str, candidates: list[Ingress]) -> Ingress | None:
    """The oldest valid master of ``host`` among ``candidates``."""
    masters = [c for c in candidates if c.mergeable == "master" and c.rules[0].host == host]
    return min(masters, key=_age) if masters else None


def mergeable_host(ing: Ingress | None) -> str | None:
    """The host a master or minion is part of; None for any other Ingress."""
    if ing is None or ing.mergeable is None or not ing.rules:
        return None
    return ing.rules[0].host


def minion_event(
    minion: Ingress, mergeable: list[Ingress], warnings: list[str]
) -> tuple[bool, str, str]:
    """A minion's Event: (a warning, reason, message), NIC's words; ``warnings``:
    those of its options (``ingress_options``)."""
    host = minion.rules[0].host
    master = master_of(host, mergeable)
    if master is None:
        return True, NO_MASTER, NO_MASTER_MESSAGE
    _, warned = minion_annotations(minion, master)
    taken = merge(host, mergeable).warnings.get(key_of(minion), [])
    every = [*warned, *warnings, *taken]
    who = key_of(minion)
    if every:
        message = f"Configuration for {who} was added or updated with warning(s): "
        return True, "AddedOrUpdatedWithWarning", message + "; ".join(every)
    return False, "AddedOrUpdated", f"Configuration for {who} was added or updated"


def denied_minion(minion: Ingress, hosts: HostRules) -> str | None:
    """Tenant mode: why a mergeable minion adds nothing to its master's host, or None."""
    host = minion.rules[0].host if minion.rules else ""
    allowed = hosts.allows(minion.meta.namespace, host)
    return None if allowed else host_denied(minion.meta.namespace, host)
