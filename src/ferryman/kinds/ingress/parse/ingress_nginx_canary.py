"""ingress-nginx's canary annotations on one Ingress, read and checked (issue 30).

An Ingress marked ``nginx.ingress.kubernetes.io/canary: "true"`` takes part of
the traffic of the main Ingress of its host and path
(``kinds/ingress/records/canary.py`` pairs them and writes the split). Here:
its annotations read into a :class:`Canary`, and the problems said in its
Event. The header and cookie names become NGINX variables
(``$http_<name>``, ``$cookie_<name>``), so they are checked as a
VirtualServer's match names are; a name that fails is not applied.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ferryman.resources import nic_rules

PREFIX = "nginx.ingress.kubernetes.io/"
NGINX_ORG = "nginx.org/"
# ingress-nginx's default for canary-weight-total (annotations.md "Canary").
DEFAULT_WEIGHT_TOTAL = 100
# What a canary reads besides ``canary`` itself (also the vocabulary table's reads).
READS = (
    "canary-by-header",
    "canary-by-header-value",
    "canary-by-header-pattern",
    "canary-by-cookie",
    "canary-weight",
    "canary-weight-total",
)
KEYS = frozenset({"canary", *READS})
# Read on a canary Ingress by ingress-nginx too; every other annotation on a
# canary is ignored (inherited from the main Ingress), and said so.
KEPT_ON_CANARY = frozenset(
    {
        "load-balance",
        "upstream-hash-by",
        "affinity",
        "affinity-canary-behavior",
        "affinity-mode",
        "session-cookie-name",
        "session-cookie-path",
        "session-cookie-domain",
        "session-cookie-samesite",
        "session-cookie-conditional-samesite-none",
        "session-cookie-expires",
        "session-cookie-max-age",
        "session-cookie-secure",
        "session-cookie-change-on-failure",
    }
)


@dataclass(frozen=True)
class Canary:
    """The canary annotations of one Ingress, checked."""

    header: str = ""
    header_value: str = ""
    header_pattern: str = ""
    cookie: str = ""
    weight: int = 0
    weight_total: int = DEFAULT_WEIGHT_TOTAL


def _int(annotations: Mapping[str, str], key: str, default: int, problems: list[str]) -> int:
    raw = annotations.get(PREFIX + key)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        problems.append(f"{PREFIX}{key}: {raw!r} is not an integer; {default} used")
        return default
    if value < 0:
        problems.append(f"{PREFIX}{key}: {value} is negative; {default} used")
        return default
    return value


def parse_canary(annotations: Mapping[str, str]) -> tuple[Canary | None, list[str]]:
    """The Ingress's canary, or None when it is not a canary, and the problems."""
    problems: list[str] = []
    if annotations.get(PREFIX + "canary", "").strip().lower() != "true":
        stray = sorted(k for k in KEYS - {"canary"} if PREFIX + k in annotations)
        if stray:
            problems.append(
                f'{", ".join(PREFIX + k for k in stray)} ignored: {PREFIX}canary is not "true"'
            )
        return None, problems
    total = _int(annotations, "canary-weight-total", DEFAULT_WEIGHT_TOTAL, problems)
    if total == 0:
        problems.append(f"{PREFIX}canary-weight-total: 0; {DEFAULT_WEIGHT_TOTAL} used")
        total = DEFAULT_WEIGHT_TOTAL
    weight = _int(annotations, "canary-weight", 0, problems)
    if weight > total:
        problems.append(f"{PREFIX}canary-weight: {weight} is above the total {total}; {total} used")
        weight = total
    header = annotations.get(PREFIX + "canary-by-header", "").strip()
    if header and (errors := nic_rules.http_header_name(header)):
        problems.append(f"{PREFIX}canary-by-header: {header!r}: {errors[0]}; ignored")
        header = ""
    value = annotations.get(PREFIX + "canary-by-header-value", "")
    pattern = annotations.get(PREFIX + "canary-by-header-pattern", "")
    if (value or pattern) and not header:
        problems.append(
            f"{PREFIX}canary-by-header-value/-pattern ignored: no {PREFIX}canary-by-header"
        )
        value = pattern = ""
    if value and pattern:
        problems.append(
            f"{PREFIX}canary-by-header-pattern ignored: {PREFIX}canary-by-header-value is set"
        )
        pattern = ""
    if pattern:
        try:
            re.compile(pattern)
        except re.error as err:
            # ingress-nginx treats a pattern that fails as not matching.
            problems.append(f"{PREFIX}canary-by-header-pattern: {err}; never matches")
    ignored = sorted(
        key
        for key in annotations
        if (key.startswith(PREFIX) and key[len(PREFIX) :] not in KEYS | KEPT_ON_CANARY)
        or key.startswith(NGINX_ORG)
    )
    if ignored:
        problems.append(
            f"{', '.join(ignored)} ignored on a canary Ingress: "
            "the main Ingress's annotations apply"
        )
    kept = sorted(
        k for k in annotations if k.startswith(PREFIX) and k[len(PREFIX) :] in KEPT_ON_CANARY
    )
    if kept:
        # ingress-nginx gives the canary's upstream its own balancing and
        # affinity; ferryman's canary upstream takes the main's for now.
        problems.append(
            f"{', '.join(kept)} on a canary Ingress: not applied by ferryman yet; "
            "the main Ingress's balancing and affinity apply to the canary's backends"
        )
    cookie = annotations.get(PREFIX + "canary-by-cookie", "").strip()
    if cookie and (errors := nic_rules.cookie_name(cookie)):
        problems.append(f"{PREFIX}canary-by-cookie: {cookie!r}: {errors[0]}; ignored")
        cookie = ""
    canary = Canary(
        header=header,
        header_value=value,
        header_pattern=pattern,
        cookie=cookie,
        weight=weight,
        weight_total=total,
    )
    return canary, problems


def canary_annotations(annotations: Mapping[str, str]) -> dict[str, str]:
    """A canary's annotations as served: its ingress-nginx and nginx.org ones
    other than the canary's own left out (``parse_canary`` says which)."""
    return {
        k: v
        for k, v in annotations.items()
        if (k.removeprefix(PREFIX) in KEYS and k.startswith(PREFIX))
        or not k.startswith((PREFIX, NGINX_ORG))
    }
