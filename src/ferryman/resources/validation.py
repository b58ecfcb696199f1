"""The one whitelist between user input and the NGINX configuration.

Every user-supplied string that the configurator places in NGINX syntax passes
through a function here first. The rules are Kubernetes' own (DNS-1123 names,
IANA service port names, the API server's Ingress path checks) narrowed
further wherever NGINX would give a character meaning: anything outside the
accepted alphabets is rejected, never escaped, so no value can end a directive
(``;``), open or close a block (``{`` ``}``), start a variable (``$``) or a
quoted string, or break a line.
"""

from __future__ import annotations

import re

_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_RE = re.compile(rf"^{_DNS1123_LABEL}$")
_DNS1123_SUBDOMAIN_RE = re.compile(rf"^{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*$")
_DNS1035_LABEL_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_IANA_SVC_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# [0-9], not \d: \d also matches other scripts' digits, which int() then reads.
_IPV4_RE = re.compile(r"^[0-9]{1,3}(\.[0-9]{1,3}){3}$")
# RFC 3986 path characters minus everything NGINX would interpret: no quotes,
# no ";", "{", "}", "$", "\\", "#", "?", whitespace or control characters.
_PATH_RE = re.compile(r"^/[A-Za-z0-9\-._~/!*+,=:@&()]*$")


def dns1123_label(value: str) -> str | None:
    """Return why ``value`` is not a DNS-1123 label, or None when it is."""
    if not value:
        return "must not be empty"
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not _DNS1123_LABEL_RE.fullmatch(value):
        return (
            "must consist of lower case alphanumeric characters or '-', and must "
            "start and end with an alphanumeric character"
        )
    return None


def dns1123_subdomain(value: str) -> str | None:
    if not value:
        return "must not be empty"
    if len(value) > 253:
        return "must be no more than 253 characters"
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        return (
            "must consist of lower case alphanumeric characters, '-' or '.', and "
            "must start and end with an alphanumeric character"
        )
    if any(len(label) > 63 for label in value.split(".")):
        return "each label must be no more than 63 characters"
    return None


def dns1035_label(value: str) -> str | None:
    if not value:
        return "must not be empty"
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not _DNS1035_LABEL_RE.fullmatch(value):
        return (
            "must consist of lower case alphanumeric characters or '-', start with "
            "an alphabetic character, and end with an alphanumeric character"
        )
    return None


def host(value: str) -> str | None:
    """Ingress rule host: a DNS-1123 subdomain, optionally ``*.`` + subdomain."""
    if len(value) > 253:
        return "must be no more than 253 characters"
    if value.startswith("*."):
        problem = dns1123_subdomain(value[2:])
        return f"wildcard host {problem}" if problem else None
    if "*" in value:
        return "a wildcard '*' is only allowed as the whole first label ('*.example.com')"
    if _IPV4_RE.fullmatch(value) or ":" in value:
        return "must be a DNS name, not an IP address"
    return dns1123_subdomain(value)


def port_number(value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return "must be an integer"
    if not 1 <= value <= 65535:
        return "must be between 1 and 65535, inclusive"
    return None


def port_name(value: str) -> str | None:
    if not value:
        return "must not be empty"
    if len(value) > 15:
        return "must be no more than 15 characters"
    if not _IANA_SVC_NAME_RE.fullmatch(value):
        return "must contain only lower case alphanumeric characters or '-'"
    if "--" in value:
        return "must not contain consecutive hyphens"
    if not any(c.isalpha() for c in value):
        return "must contain at least one letter"
    return None


def nginx_time(value: str) -> str | None:
    """An NGINX time such as 500ms, 10s, 1m or 2h (what `fail-timeout` and friends take)."""
    if not re.fullmatch(r"[0-9]{1,9}(ms|s|m|h|d)?", value):
        return "must be a time such as 500ms, 10s, 1m or 2h"
    return None


def worker_processes(value: str) -> str | None:
    if value == "auto" or re.fullmatch(r"[1-9][0-9]{0,3}", value):
        return None
    return "must be auto or a number of processes"


def http_path(value: str, path_type: str) -> str | None:
    """An Ingress HTTP path, by the API server's rules plus the NGINX whitelist."""
    if not value.startswith("/"):
        return "must be an absolute path (start with '/')"
    if path_type in ("Exact", "Prefix"):
        for bad in ("//", "/./", "/../"):
            if bad in value:
                return f"must not contain '{bad}'"
        if value.endswith(("/..", "/.")):
            return "must not end with '/..' or '/.'"
    if "%" in value:
        return (
            "must not contain percent-encoding: NGINX matches decoded paths, so "
            "write the path unencoded"
        )
    if not _PATH_RE.fullmatch(value):
        bad_chars = sorted({c for c in value if not _PATH_RE.fullmatch("/" + c)})
        shown = ", ".join(repr(c) for c in bad_chars)
        return f"contains characters that are not allowed: {shown}"
    return None


def nginx_single_quoted(text: str) -> str:
    """``text`` as one single-quoted NGINX string, whatever it holds.

    NGINX's configuration reader ends a quoted string only at an unescaped
    quote, and unescapes exactly ``\\'``, ``\\"``, ``\\\\`` (and ``\\t``, ``\\r``,
    ``\\n``): escaping every backslash and single quote makes the token read back
    as ``text``, so ``;``, ``{``, ``}`` or a quote inside it stay text. Line breaks
    and other control characters are refused by the callers (a log format is
    split on them, as NIC does)."""
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise ValueError("control characters cannot be quoted")
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
