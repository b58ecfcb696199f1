"""NIC's ``nginx.org/limit-req-*`` Ingress annotations, as the rateLimit Policy's
configuration (``policy_rate``): enforced per request in Lua, no reload.

NIC (internal/configs/ingress.go) declares one ``limit_req_zone`` per Ingress,
named ``<namespace>/<name>``, keyed by ``limit-req-key`` (default
``${binary_remote_addr}``), and writes ``limit_req`` into every location of
the Ingress with ``burst``, ``nodelay`` or ``delay``, ``limit_req_dry_run``,
``limit_req_log_level`` (default ``error``) and ``limit_req_status`` (default
429). Only ``limit-req-rate`` turns it on. NIC validates ``limit-req-key``
(an invalid one rejects the Ingress: ``ingress_annotations``) and only logs
the other values it cannot parse; ferryman says so in a Warning instead, and
leaves that value at its default.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ferryman.kinds.ingress.parse.annotations import PREFIX
from ferryman.kinds.policy.records.attach import NONE, Attached
from ferryman.kinds.policy.records.rate import Limit, RateLimits
from ferryman.resources.annotation_values import BadValue, parse_bool, parse_size

RATE = PREFIX + "limit-req-rate"
_RATE = re.compile(r"([0-9]+)(r/s|r/m)", re.ASCII)
_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_UNBRACED = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)", re.ASCII)
LOG_LEVELS = ("info", "notice", "warn", "error")
DEFAULT_KEY = "${binary_remote_addr}"


@dataclass(frozen=True)
class LimitReq:
    """What an Ingress's limit-req annotations ask for (NIC's defaults)."""

    rate: int  # thousandths of a request per second (NGINX's unit)
    key: str = DEFAULT_KEY  # NIC's ${variable} syntax
    burst: int = 0
    delay: int = 0  # -1: nodelay
    dry_run: bool = False
    log_level: str = "error"
    reject_code: int = 429


def parse_rate(value: str) -> int:
    """NIC's ParseRequestRate, in thousandths of a request per second."""
    m = _RATE.fullmatch(value.strip())
    if m is None:
        raise BadValue("string does not match rate-pattern: ^(\\d+)(r/s|r/m)$")
    number = int(m.group(1))
    if number <= 0:
        raise BadValue("rate must be >0")
    return number * 1000 // (60 if m.group(2) == "r/m" else 1)


def _count(value: str) -> int:
    if not _INT.fullmatch(value) or not 0 <= int(value) < 1 << 31:
        raise BadValue("must be a non-negative integer")
    return int(value)


def _log_level(value: str) -> str:
    if value not in LOG_LEVELS:
        raise BadValue("must be one of: " + ", ".join(LOG_LEVELS))
    return value


def _reject_code(value: str) -> int:
    # NGINX's limit_req_status takes 400-599 only (else nginx -t fails).
    if not _INT.fullmatch(value) or not 400 <= int(value) <= 599:
        raise BadValue("must be an HTTP status code from 400 to 599")
    return int(value)


def limit_req(annotations: Mapping[str, str]) -> tuple[LimitReq | None, list[str]]:
    """The limit NIC's annotations ask for (None: no ``limit-req-rate``), and
    warnings for what is not applied."""
    warnings: list[str] = []
    others = sorted(k for k in annotations if k.startswith(PREFIX + "limit-req-") and k != RATE)
    if RATE not in annotations:
        if others:
            warnings.append(f"{', '.join(others)}: ignored without {RATE} (as NIC does)")
        return None, warnings

    def value(key: str, parse: Callable[[str], object], default: object) -> object:
        raw = annotations.get(PREFIX + key)
        if raw is None:
            return default
        try:
            return parse(raw)
        except BadValue as e:
            warnings.append(f"invalid value for {PREFIX}{key}: got {raw}: {e}; ignored")
            return default

    rate = value("limit-req-rate", parse_rate, None)
    if not isinstance(rate, int):
        return None, warnings
    key = annotations.get(PREFIX + "limit-req-key") or DEFAULT_KEY
    no_delay = value("limit-req-no-delay", parse_bool, False) is True
    delay = value("limit-req-delay", _count, 0)
    limit = LimitReq(
        rate=rate,
        # Validated as NIC's $name/${name} references; the data plane reads ${name}.
        key=_UNBRACED.sub(r"${\1}", key),
        burst=_int(value("limit-req-burst", _count, 0)),
        delay=-1 if no_delay else _int(delay),
        dry_run=value("limit-req-dry-run", parse_bool, False) is True,
        log_level=str(value("limit-req-log-level", _log_level, "error")),
        reject_code=_int(value("limit-req-reject-code", _reject_code, 429), 429),
    )
    if value("limit-req-zone-size", parse_size, None) is not None:
        warnings.append(
            f"{PREFIX}limit-req-zone-size: ferryman's limits share one zone "
            "(ferryman_limits); ignored"
        )
    if value("limit-req-scale", parse_bool, False) is True:
        warnings.append(
            f"{PREFIX}limit-req-scale: not applied: ferryman does not know how many "
            "replicas share the traffic, so the rate is each replica's"
        )
    return limit, warnings


def _int(value: object, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def limit_req_policy(namespace: str, name: str, limit: LimitReq | None) -> Attached:
    """The limit as the rateLimit Policy's configuration of the Ingress's routes;
    its zone is the Ingress's (one bucket per key for all of its paths)."""
    if limit is None:
        return NONE
    zone = f"ingress/{namespace}/{name}"
    one = Limit(zone, limit.rate, limit.key, limit.burst, limit.delay)
    return Attached(
        {RateLimits: RateLimits((one,), limit.dry_run, limit.log_level, limit.reject_code)}
    )
