"""ingress-nginx canary Ingresses as Gateway API (``ferryman migrate --to
gateway-api``): each canary is folded into its main Ingress's HTTPRoute.

- canary-weight: the main path's rule splits its backendRefs by weight (whole
  percent, as ``records/canary.canary_percent``);
- canary-by-header (``always``/``never``, a value, a pattern) and
  canary-by-cookie (``always``/``never``): rules of the same path with a header
  match, listed before the path's own rule in ingress-nginx's order (header,
  then cookie). Gateway API has no cookie match: the cookie is matched in the
  ``Cookie`` header by a regular expression anchored at both ends, so it means
  the same whether an implementation searches or matches the whole value.

Gateway API prefers a rule with more header matches to one with fewer, then the
first listed, so a header rule wins over the split and ``never`` of the header
over ``always`` of the cookie, as in ingress-nginx.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ferryman.kinds.ingress.parse.ingress_nginx_canary import PREFIX, Canary, parse_canary
from ferryman.kinds.ingress.records.canary import canary_percent


@dataclass(frozen=True)
class GatewayCanary:
    """A canary Ingress's path: its backend and its canary annotations."""

    service: str
    port: int
    canary: Canary


def canaries(ingresses: list[Mapping[str, Any]]) -> tuple[dict[str, GatewayCanary], set[str]]:
    """ "namespace/host/path" -> the canary of that path, and the canary Ingresses
    ("namespace/name") folded into their main one's route."""
    found: dict[str, GatewayCanary] = {}
    folded: set[str] = set()
    for obj in ingresses:
        meta = obj.get("metadata") or {}
        annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
        canary, _ = parse_canary(annotations)
        if canary is None:
            continue
        namespace = str(meta.get("namespace") or "default")
        for rule in (obj.get("spec") or {}).get("rules") or []:
            for p in (rule.get("http") or {}).get("paths") or []:
                svc = (p.get("backend") or {}).get("service") or {}
                port = (svc.get("port") or {}).get("number")
                if isinstance(port, int):
                    key = f"{namespace}/{rule.get('host', '')}/{p.get('path') or '/'}"
                    found.setdefault(key, GatewayCanary(str(svc.get("name", "")), port, canary))
                    folded.add(f"{namespace}/{meta.get('name') or ''}")
    return found, folded


def _header_matches(c: Canary) -> list[tuple[dict[str, str], bool]]:
    """The canary's header matches in ingress-nginx's order, each with whether
    it sends the request to the canary."""
    out: list[tuple[dict[str, str], bool]] = []
    if c.header:
        if c.header_value:
            out.append(({"type": "Exact", "name": c.header, "value": c.header_value}, True))
        elif c.header_pattern:
            match = {"type": "RegularExpression", "name": c.header, "value": c.header_pattern}
            out.append((match, True))
        else:
            out.append(({"type": "Exact", "name": c.header, "value": "always"}, True))
            out.append(({"type": "Exact", "name": c.header, "value": "never"}, False))
    if c.cookie:
        for word, to_canary in (("always", True), ("never", False)):
            value = rf"^(.*;\s*)?{re.escape(c.cookie)}={word}(;.*)?$"
            out.append(({"type": "RegularExpression", "name": "Cookie", "value": value}, to_canary))
    return out


def canary_rules(
    rule: dict[str, Any], main: dict[str, Any], canary: GatewayCanary, missing: list[str]
) -> list[dict[str, Any]]:
    """The path's rules with ``canary``: its header rules, then ``rule`` (whose
    one match is the path's) with the weighted split; ``main`` its backendRef."""
    ref = {"name": canary.service, "port": canary.port}
    percent, rounded = canary_percent(canary.canary)
    if rounded:
        missing.append(rounded)
    if canary.canary.header_pattern:
        missing.append(
            f"{PREFIX}canary-by-header-pattern: a RegularExpression header match "
            "(ingress-nginx searches the value; an implementation may match it whole)"
        )
    [match] = rule["matches"]
    out = []
    for header, to_canary in _header_matches(canary.canary):
        backend = ref if to_canary else {k: v for k, v in main.items() if k != "weight"}
        out.append({**rule, "matches": [{**match, "headers": [header]}], "backendRefs": [backend]})
    if percent >= 100:
        rule["backendRefs"] = [ref]
    elif percent > 0:
        main["weight"] = 100 - percent
        rule["backendRefs"] = [main, {**ref, "weight": percent}]
    return [*out, rule]
