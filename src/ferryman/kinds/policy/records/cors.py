"""The ``cors`` Policy: NIC's headers (``add_header ... always``) and its preflight answer.

NIC adds, on every response of the route: ``Vary: Origin`` (unless the only
origin is ``*``), ``Access-Control-Allow-Origin`` (``*``; the one origin; or,
for several or a ``*.`` wildcard, the configured origin matching the request's
``Origin``, caselessly, or the request's own for a wildcard match, else none),
``-Allow-Methods``, ``-Allow-Headers``, ``-Allow-Credentials``,
``-Expose-Headers`` and ``-Max-Age``; any ``OPTIONS`` request is answered 204
with them (``text/plain``, length 0) before the route's other policies run.
A route's cors replaces the VirtualServer's; of several in one context the
last is used, as in NIC. Requests no route matches get none (NIC writes them
into locations only).

P item: ``c|<origin>|<vary 0|1>|<headers>``: ``<origin>`` is ``*``, ``=<one>``
or ``,``-separated ``e.<origin>`` and ``w.<regex>`` (base64); ``<headers>``
``^``-separated ``<name>~<value>`` (base64).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from ferryman.configs.record_text import b64
from ferryman.kinds.policy.parse.cors import CORS
from ferryman.kinds.policy.parse.policy import Policy
from ferryman.kinds.policy.records.base import Enforced, Owner, Step
from ferryman.kinds.policy.records.reads import PolicyReads


@dataclass(frozen=True)
class Cors(Enforced):
    origin: str
    vary: bool
    headers: tuple[tuple[str, str], ...]
    letter = "c"

    def fields(self) -> tuple[str, ...]:
        headers = "^".join(f"{b64(n)}~{b64(v)}" for n, v in self.headers)
        return (self.origin, "1" if self.vary else "0", headers)


def _wildcard(origin: str) -> str | None:
    """NIC's buildOriginRegex: ``https://*.example.com`` -> one label in place of ``*``."""
    parts = urlsplit(origin)
    if parts.scheme not in ("http", "https") or not parts.netloc.startswith("*."):
        return None
    return f"^{re.escape(parts.scheme + '://')}[^.]+\\.{re.escape(parts.netloc[2:])}$"


def _origin(origins: tuple[str, ...]) -> str:
    if origins == ("*",):
        return "*"
    if len(origins) == 1 and _wildcard(origins[0]) is None:
        return "=" + b64(origins[0])
    out = []
    for o in origins:
        regex = _wildcard(o)
        out.append(f"w.{b64(regex)}" if regex is not None else f"e.{b64(o)}")
    return ",".join(out)


def translate(
    policy: Policy, key: str, current: Enforced | None, owner: Owner, reads: PolicyReads
) -> Step:
    c = policy.policy
    assert isinstance(c, CORS)
    headers = [
        ("Access-Control-Allow-Methods", ", ".join(c.allow_methods)),
        ("Access-Control-Allow-Headers", ", ".join(c.allow_headers)),
        # The CRD defaults both: NIC then always writes them.
        ("Access-Control-Allow-Credentials", "true" if c.allow_credentials else "false"),
        ("Access-Control-Expose-Headers", ", ".join(c.expose_headers)),
        ("Access-Control-Max-Age", str(c.max_age)),
    ]
    kept = tuple((n, v) for n, v in headers if v)
    return Step(Cors(_origin(c.allow_origin), c.allow_origin != ("*",), kept))
