"""``nginx.org/proxy-redirect-from`` and ``-to``: NIC's validation of NGINX's
``proxy_redirect`` parameters (internal/k8s/validation.go), each value and
the pair. ferryman applies them per request (kinds/ingress/records/as_virtualserver.py,
ferryman_proxy_redirect.lua); the characters NIC refuses would also be the
ones that could end or comment out a directive in its configuration.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ferryman.resources.nic_fields import Problem, invalid
from ferryman.resources.pcre import pcre_error

FROM = "nginx.org/proxy-redirect-from"
TO = "nginx.org/proxy-redirect-to"
KEYWORDS = ("off", "default")

# NIC's proxyRedirectValueRegex: no directive-injection characters.
_VALUE = re.compile(r"[^;{}`\n\r\s#]+")
_CHARS = "must not contain ';', '{', '}', newline, carriage return, backtick, whitespace, or '#'"


def parse_from(value: str) -> str:
    """NIC's validateProxyRedirectFromAnnotation: off, default, a URL, or a
    regular expression after ``~`` (``~*``: caseless); ValueError with NIC's
    message."""
    if value in KEYWORDS:
        return value
    if not _VALUE.fullmatch(value):
        raise ValueError(_CHARS)
    if value.startswith("~"):
        regex = value.removeprefix("~*") if value.startswith("~*") else value[1:]
        if (error := pcre_error(regex)) is not None:
            raise ValueError(f"invalid regex pattern: {error}")
    return value


def parse_to(value: str) -> str:
    """NIC's validateProxyRedirectToAnnotation."""
    if not _VALUE.fullmatch(value):
        raise ValueError(_CHARS)
    return value


def pair_problem(annotations: Mapping[str, str]) -> Problem | None:
    """NIC's validateProxyRedirectPair."""
    if TO in annotations and FROM not in annotations:
        return invalid(f"annotations.{TO}", "", f"{TO} requires {FROM} to also be set")
    origin = annotations.get(FROM)
    if origin in KEYWORDS and TO in annotations:
        return invalid(f"annotations.{TO}", "", f'{TO} cannot be set when {FROM} is "{origin}"')
    if origin is not None and origin not in KEYWORDS and TO not in annotations:
        return invalid(
            f"annotations.{FROM}",
            origin,
            f"{FROM} with a URL or regex value requires {TO} to also be set",
        )
    return None
