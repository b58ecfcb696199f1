"""The value parsers of NIC's ``nginx.org/*`` Ingress annotations.

Each parser takes an annotation's text and returns its value, or raises
``BadValue`` with NIC's detail (``must be a time``, ``must be a boolean``, ...),
the message NIC's field error carries. The ConfigMap keys of the same names are
read with the same parsers (``kinds/ingress/records/options.py``), so both are read
alike. Apart from ``ingress_annotations.py``, which says which annotations
exist and NIC's rules between them, because the parsers are the detail of how
one value is read.
"""

from __future__ import annotations

import re

from ferryman.resources import nic_rules
from ferryman.resources.nic_upstream import LB_METHODS, NEXT_UPSTREAM

BOOLS = {
    # Go's strconv.ParseBool, which NIC's ParseBool is.
    "1": True,
    "t": True,
    "T": True,
    "TRUE": True,
    "true": True,
    "True": True,
    "0": False,
    "f": False,
    "F": False,
    "FALSE": False,
    "false": False,
    "False": False,
}
_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_UINT = re.compile(r"\+?[0-9]+", re.ASCII)
_PROXY_BUFFERS = re.compile(r"([0-9]+) ([0-9]+)([kKmM]?)", re.ASCII)
_REWRITE_PATH = re.compile(r"/[^\s{};$]*")
# NIC's escaped strings: every '"' escaped, no unescaped '\' at the end.
ESCAPED = re.compile(r'([^"\\]|\\.)*', re.S)


class BadValue(ValueError):
    """A value an annotation (or ConfigMap key) does not take; ``str`` is NIC's detail."""


def parse_bool(value: str) -> bool:
    if value not in BOOLS:
        raise BadValue("must be a boolean")
    return BOOLS[value]


def parse_time_ms(value: str) -> int:
    ms = nic_rules.time_ms(value)
    if ms is None:
        raise BadValue("must be a time")
    return ms


def parse_offset(value: str) -> int:
    size = nic_rules.offset_bytes(value)
    if size is None:
        raise BadValue("must be an offset")
    return size


def parse_size(value: str) -> int:
    size = nic_rules.size_bytes(value)
    if size is None:
        raise BadValue(nic_rules.SIZE_ERROR)
    return size


def parse_uint(value: str) -> int:
    if not _UINT.fullmatch(value) or int(value) >= 1 << 64:
        raise BadValue("must be a non-negative integer")
    return int(value)


def parse_int(value: str) -> int:
    if not _INT.fullmatch(value) or not -(1 << 63) <= int(value) < 1 << 63:
        raise BadValue("must be an integer")
    return int(value)


def parse_lb_method(value: str) -> str:
    method = value.strip()
    if method in LB_METHODS:
        return method
    if method.startswith("hash"):
        key = method.removeprefix("hash").strip().removesuffix("consistent").strip()
        if key and not nic_rules.token_with_variables(key):
            return method
        raise BadValue(f"invalid value for hash: {method!r}")
    raise BadValue(f'invalid load balancing method: "{method}"')


def parse_headers(value: str) -> tuple[str, ...]:
    names = tuple(h.strip() for h in value.split(","))
    for name in names:
        for msg in nic_rules.http_header_name(name):
            raise BadValue(msg)
    return names


def parse_ports(value: str) -> tuple[int, ...]:
    ports = []
    for part in value.split(","):
        if not _INT.fullmatch(part) or not 0 < int(part) < 1 << 31:
            raise BadValue("must be a comma-separated list of port numbers")
        ports.append(int(part))
    return tuple(ports)


def parse_proxy_buffers(value: str) -> str:
    m = _PROXY_BUFFERS.fullmatch(value.strip())
    if m is None:
        raise BadValue("must be a proxy buffer spec")
    return value.strip()


def parse_next_upstream(value: str) -> tuple[str, ...]:
    seen: list[str] = []
    for method in value.split():
        if method in seen:
            raise BadValue(f"duplicate value: {method}")
        if method not in NEXT_UPSTREAM:
            raise BadValue(
                "must be a space-separated list with any of the following values: "
                + ", ".join(sorted(NEXT_UPSTREAM))
            )
        seen.append(method)
    return tuple(seen)


def parse_rewrites(value: str) -> dict[str, str]:
    """NIC's ParseRewriteList: ``serviceName=<svc> rewrite=<path>``, ``;``-separated."""
    out: dict[str, str] = {}
    for part in value.split(";"):
        pieces = part.strip().split(" ", 1)
        if len(pieces) != 2:
            raise BadValue(
                f"'{part}' is not a valid rewrite format, e.g. 'serviceName=tea-svc rewrite=/'"
            )
        svc, path = pieces[0].split("="), pieces[1].split("=")
        if len(svc) != 2 or svc[0] != "serviceName":
            raise BadValue(
                f"'{pieces[0]}' is not a valid serviceName format, e.g. 'serviceName=tea-svc'"
            )
        if len(path) != 2 or path[0] != "rewrite":
            raise BadValue(f"'{pieces[1]}' is not a valid rewrite path format, e.g. 'rewrite=/tea'")
        if not _REWRITE_PATH.fullmatch(path[1]):
            raise BadValue(
                "path must start with '/' and must not include any whitespace character, "
                f"'{{', '}}' or '$': '{path[1]}'"
            )
        out[svc[1]] = path[1]
    return out


def parse_services(value: str) -> frozenset[str]:
    return frozenset(value.split(","))


def parse_realm(value: str) -> str:
    if problems := nic_rules.realm(value):
        raise BadValue(problems[0])
    return value


def parse_secret_name(value: str) -> str:
    if problems := nic_rules.dns1123_subdomain(value):
        raise BadValue(problems[0])
    return value


def parse_path_regex(value: str) -> str:
    if value not in ("case_sensitive", "case_insensitive", "exact"):
        raise BadValue("allowed values: 'case_sensitive', 'case_insensitive' or 'exact'")
    return value


def parse_redirect_code(value: str) -> int:
    if value not in ("301", "302", "307", "308"):
        raise BadValue(f"invalid redirect code: {value}. Must be one of: 301, 302, 307, 308")
    return int(value)


def parse_mergeable(value: str) -> str:
    if value not in ("master", "minion"):
        raise BadValue("must be one of: 'master' or 'minion'")
    return value


def _header_value(value: str) -> None:
    """NIC's ValidateAddHeaderValue."""
    if "\n" in value or "\r" in value:
        raise BadValue("value must not contain newline or carriage-return characters")
    if "$" in value:
        raise BadValue("invalid character in header value: $")
    if not ESCAPED.fullmatch(value):
        raise BadValue(
            nic_rules.regex_error(
                "must have all '\"' (double quotes) escaped and must not end with an "
                "unescaped '\\' (backslash)",
                r'([^"\\]|\\.)*',
            )
        )


def parse_set_headers(value: str) -> tuple[tuple[str, str], ...]:
    """NIC's proxy-set-headers: ``Name[: value]``, ``,``-separated; a name alone
    sends the client's own header (``$http_<name>``)."""
    out = []
    for entry in value.split(","):
        entry = entry.strip()
        name, sep, raw = entry.partition(":")
        name = name.strip()
        if not name:
            raise BadValue("empty header name")
        for msg in nic_rules.http_header_name(name):
            raise BadValue(msg)
        if sep:
            _header_value(raw.strip())
            out.append((name, raw.strip()))
        else:
            out.append((name, "${http_" + name.lower().replace("-", "_") + "}"))
    return tuple(out)


def parse_add_headers(value: str) -> tuple[tuple[str, str, bool], ...]:
    """NIC's add-header: ``Name: value[: always]``, ``,``-separated."""
    out = []
    for entry in value.split(","):
        parts = [p.strip() for p in entry.strip().split(":", 2)]
        if not parts[0]:
            raise BadValue("empty header name")
        for msg in nic_rules.http_header_name(parts[0]):
            raise BadValue(msg)
        header = parts[1] if len(parts) >= 2 else ""
        _header_value(header)
        flag = parts[2] if len(parts) == 3 else ""
        if flag and flag.lower() != "always":
            raise BadValue(f'invalid flag "{flag}": must be "always" or empty')
        out.append((parts[0], header, flag.lower() == "always"))
    return tuple(out)


def parse_add_header_key(value: str) -> tuple[str | None, str | None]:
    """The ConfigMap's add-header (the annotation's syntax), as the ConfigMap's
    parsers answer: (the value, None) or (None, why)."""
    try:
        parse_add_headers(value)
    except BadValue as e:
        return None, f"invalid add-header {value!r}: {e}"
    return value, None


_LIMIT_REQ_KEY = r"^(\$\{[a-zA-Z_][a-zA-Z0-9_]*\}|\$[a-zA-Z_][a-zA-Z0-9_]*)+$"  # NIC's
_LIMIT_REQ_KEY_RE = re.compile(_LIMIT_REQ_KEY[1:-1], re.ASCII)


def parse_limit_req_key(value: str) -> str:
    """NIC's validateLimitReqKeyAnnotation: NGINX variable references only."""
    if not _LIMIT_REQ_KEY_RE.fullmatch(value):
        raise BadValue(
            nic_rules.regex_error(
                "must consist of one or more NGINX variable references ($varname or "
                "${varname}); must not contain ';', '\"', '\\', or newline characters",
                _LIMIT_REQ_KEY,
                "$binary_remote_addr",
                "${request_uri}",
            )
        )
    return value
