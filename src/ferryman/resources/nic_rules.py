"""The validation layer for NIC's custom resources: every value rule, with NIC's texts.

Everything a VirtualServer, VirtualServerRoute or Policy says that could later
reach NGINX passes a function here first. Two kinds of value exist:

- **Tokens** (hosts, names, paths, header and cookie names, times, sizes, URLs,
  keys): NIC's rule, narrowed to an alphabet in which nothing ends a directive
  (``;``), opens or closes a block (``{`` ``}``), quotes, escapes (``\\``) or
  breaks a line; ``$`` appears only as a ``${variable}`` NIC allows there.
  Times and sizes become numbers in the models, so their text never travels.
- **Quoted text** (return bodies and types, header values, realms, match
  values): NIC's rule that every ``"`` is escaped and no ``\\`` ends the text,
  so the value cannot leave the quoted string it is written into, plus no
  control characters but tab and newline (a newline in a header value would
  inject a header).

The messages are NIC's (pkg/apis/configuration/validation) and Kubernetes'
(k8s.io/apimachinery/pkg/util/validation), word for word, where NIC has a rule;
ferryman's narrowing says ``ferryman`` in its message.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Collection, Iterable

# ---- Kubernetes' name rules -----------------------------------------------------

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_WILDCARD_FMT = "\\*\\." + _DNS1123_SUBDOMAIN_FMT
_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = "(" + _LABEL_KEY_FMT + ")?"
_HEADER_NAME_FMT = "[-A-Za-z0-9]+"


def regex_error(message: str, fmt: str, *examples: str) -> str:
    """Kubernetes' RegexError text, spacing included."""
    if not examples:
        return f"{message} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def range_error(lo: int, hi: int) -> str:
    return f"must be between {lo} and {hi}, inclusive"


def _full(fmt: str, value: str) -> bool:
    # ASCII only: Go's regexp classes are ASCII, Python's \d and \s are not.
    return re.fullmatch(fmt, value, re.ASCII) is not None


def dns1123_label(value: str) -> list[str]:
    errs = [max_len_error(63)] if len(value) > 63 else []
    if not _full(_DNS1123_LABEL_FMT, value):
        errs.append(
            regex_error(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
                "or '-', and must start and end with an alphanumeric character",
                _DNS1123_LABEL_FMT,
                "my-name",
                "123-abc",
            )
        )
    return errs


def dns1123_subdomain(value: str) -> list[str]:
    errs = [max_len_error(253)] if len(value) > 253 else []
    if not _full(_DNS1123_SUBDOMAIN_FMT, value):
        errs.append(
            regex_error(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character",
                _DNS1123_SUBDOMAIN_FMT,
                "example.com",
            )
        )
    return errs


def wildcard_dns1123_subdomain(value: str) -> list[str]:
    errs = [max_len_error(253)] if len(value) > 253 else []
    if not _full(_WILDCARD_FMT, value):
        errs.append(
            regex_error(
                "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS "
                "subdomain, which must consist of lower case alphanumeric characters, '-' or "
                "'.' and end with an alphanumeric character",
                _WILDCARD_FMT,
                "*.example.com",
            )
        )
    return errs


def dns1035_label(value: str) -> list[str]:
    errs = [max_len_error(63)] if len(value) > 63 else []
    if not _full(_DNS1035_LABEL_FMT, value):
        errs.append(
            regex_error(
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                "start with an alphabetic character, and end with an alphanumeric character",
                _DNS1035_LABEL_FMT,
                "my-name",
                "abc-123",
            )
        )
    return errs


_LABEL_KEY_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character"
)


def qualified_name(value: str) -> list[str]:
    """A label key: an optional DNS-subdomain prefix and '/', then a name."""
    parts = value.split("/")
    errs: list[str] = []
    if len(parts) > 2:
        return [
            "a valid label key "
            + regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    if len(parts) == 2:
        if not parts[0]:
            errs.append("prefix part must be non-empty")
        else:
            errs += ["prefix part " + m for m in dns1123_subdomain(parts[0])]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + max_len_error(63))
    if not _full(_LABEL_KEY_FMT, name):
        errs.append(
            "name part "
            + regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
        )
    return errs


def label_value(value: str) -> list[str]:
    errs = [max_len_error(63)] if len(value) > 63 else []
    if not _full(_LABEL_VALUE_FMT, value):
        errs.append(
            regex_error(
                "a valid label must be an empty string or consist of alphanumeric characters, "
                "'-', '_' or '.', and must start and end with an alphanumeric character",
                _LABEL_VALUE_FMT,
                "MyValue",
                "my_value",
                "12345",
            )
        )
    return errs


def http_header_name(value: str) -> list[str]:
    if _full(_HEADER_NAME_FMT, value):
        return []
    return [
        regex_error(
            "a valid HTTP header must consist of alphanumeric characters or '-'",
            _HEADER_NAME_FMT,
            "X-Header-Name",
        )
    ]


def port(value: int) -> list[str]:
    return [] if 1 <= value <= 65535 else [range_error(1, 65535)]


_COOKIE_FMT = "[_A-Za-z0-9]+"


def cookie_name(value: str) -> list[str]:
    if _full(_COOKIE_FMT, value):
        return []
    return [
        regex_error(
            "a valid cookie name must consist of alphanumeric characters or '_'",
            _COOKIE_FMT,
            "my_cookie_123",
        )
    ]


def argument_name(value: str) -> list[str]:
    if _full(_COOKIE_FMT, value):
        return []
    return [
        regex_error(
            "a valid argument name must consist of alphanumeric characters or '_'",
            _COOKIE_FMT,
            "argument_123",
        )
    ]


# ---- quoted text ------------------------------------------------------------------

_ESCAPED_FMT = r'([^"\\]|\\.)*'
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_CONTROL_MSG = "must not contain control characters other than tab and newline (ferryman)"


def escaped_string(value: str, *examples: str) -> str | None:
    """NIC's ValidateEscapedString: every '"' escaped, no '\\' at the end."""
    if re.fullmatch(_ESCAPED_FMT, value, re.DOTALL):
        return None
    return regex_error(
        "must have all '\"' (double quotes) escaped and must not end with an unescaped '\\' "
        "(backslash)",
        _ESCAPED_FMT,
        *examples,
    )


def quoted_text(value: str, *examples: str) -> list[str]:
    """Text NGINX would hold between quotes: NIC's escaping rule plus no control bytes."""
    errs = []
    if problem := escaped_string(value, *examples):
        errs.append(problem)
    if _CONTROL.search(value):
        errs.append(_CONTROL_MSG)
    return errs


_HEADER_VALUE_FMT = r'([^"$\\]|\\[^$])*'
_LINE_BREAK_OR_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def single_line(value: str) -> list[str]:
    """Text that must stay on one line: a header value, a realm (a line break injects a header)."""
    if _LINE_BREAK_OR_CONTROL.search(value):
        return ["must not contain control characters or line breaks (ferryman)"]
    return []


def header_value(value: str) -> list[str]:
    """A header value without variables (NIC's isValidHeaderValue)."""
    errs = []
    if not re.fullmatch(_HEADER_VALUE_FMT, value, re.DOTALL):
        errs.append(
            regex_error(
                "a valid header must have all '\"' escaped and must not contain any '$' or "
                "end with an unescaped '\\'",
                _HEADER_VALUE_FMT,
                "my.service",
                "foo",
            )
        )
    return errs + single_line(value)


def realm(value: str) -> list[str]:
    errs = []
    if not re.fullmatch(_HEADER_VALUE_FMT, value, re.DOTALL):
        errs.append(
            regex_error(
                "a valid realm must have all '\"' escaped and must not contain any '$' or end "
                "with an unescaped '\\'",
                _HEADER_VALUE_FMT,
                "MyAPI",
                "My Product API",
            )
        )
    return errs + single_line(value)


# ---- tokens ----------------------------------------------------------------------

# Characters NGINX's configuration syntax gives a meaning to outside quotes.
NGINX_SIGNIFICANT = frozenset(";{}\"'\\`")


def token(value: str, what: str = "value") -> list[str]:
    """A bare token: no whitespace, control characters or NGINX syntax characters."""
    bad = sorted({c for c in value if c in NGINX_SIGNIFICANT or c.isspace() or _CONTROL.match(c)})
    if not bad:
        return []
    shown = ", ".join(repr(c) for c in bad)
    return [
        f"a {what} must not contain whitespace, control characters, quotes, '\\', '`', ';', "
        f"'{{' or '}}' (ferryman): found {shown}"
    ]


def regular_expression(value: str) -> list[str]:
    """A route's regular expression: a token, but ``\\`` is allowed. NGINX reads
    ``location ~ \\.png$`` with its escape rule for tokens (``\\\\`` is one
    backslash, ``\\t`` a tab, ``\\.`` stays), and so does ferryman, which never
    writes it into configuration: it travels base64-encoded in a record."""
    return token(value.replace("\\", ""), "regular expression")


def token_with_variables(value: str, what: str = "value") -> list[str]:
    """A token that may hold ``${variable}``s: the braces of those are not refused."""
    return token(_VARIABLE.sub("", value), what)


# ---- NGINX values ------------------------------------------------------------------

_TIME = re.compile(
    r"(\d+y)??\s*(\d+M)??\s*(\d+w)??\s*(\d+d)??\s*(\d+h)??\s*(\d+m)??\s*(\d+s?)??\s*(\d+ms)??",
    re.ASCII,
)
_UNIT_MS = {"y": 31536000000, "M": 2592000000, "w": 604800000, "d": 86400000}
_UNIT_MS |= {"h": 3600000, "m": 60000, "s": 1000, "ms": 1}


def time_ms(value: str) -> int | None:
    """An NGINX time ("60s", "1m 30s", "500ms", bare seconds) in milliseconds; None if invalid.

    NIC's ParseTime grammar: units from years to milliseconds, each at most
    once and in order, optionally separated by whitespace.
    """
    if not value.strip():
        return None
    m = _TIME.fullmatch(value)
    if not m:
        return None
    total = 0
    for group in m.groups():
        if not group:
            continue
        digits = re.match(r"\d+", group, re.ASCII)
        assert digits is not None  # every group starts with digits
        unit = group[digits.end() :] or "s"
        total += int(digits.group()) * _UNIT_MS[unit]
    return total


TIME_ERROR = "invalid time string"
_SIZE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def _bytes(value: str, units: str) -> int | None:
    m = re.fullmatch(rf"(\d+)([{units}]?)", value.strip(), re.ASCII)
    if not m:
        return None
    return int(m.group(1)) * _SIZE_UNITS[m.group(2).lower()]


def size_bytes(value: str) -> int | None:
    """An NGINX size ("16", "32k", "64M") in bytes; None if invalid (NIC's ParseSize)."""
    return _bytes(value, "kKmM")


def offset_bytes(value: str) -> int | None:
    """An NGINX offset ("16", "32k", "64M", "2G") in bytes; None if invalid (NIC's ParseOffset)."""
    return _bytes(value, "kKmMgG")


SIZE_ERROR = regex_error(
    "must consist of numeric characters followed by a valid size suffix. 'k|K|m|M",
    r"\d+[kKmM]?",
    "16",
    "32k",
    "64M",
)
OFFSET_ERROR = regex_error(
    "must consist of numeric characters followed by a valid size suffix. 'k|K|m|M|g|G",
    r"\d+[kKmMgG]?",
    "16",
    "32k",
    "64M",
    "2G",
)

REDIRECT_CODES = (301, 302, 307, 308)
REDIRECT_CODE_ERROR = (
    "status code out of accepted range. accepted values are '301', '302', '307', '308'"
)


def ip_or_cidr(value: str) -> bool:
    """What Go's net.ParseCIDR or net.ParseIP accept (a prefix length, never a netmask)."""
    address, slash, prefix = value.partition("/")
    if slash and not re.fullmatch(r"[0-9]{1,3}", prefix):
        return False
    try:
        if slash:
            ipaddress.ip_network(value, strict=False)
        else:
            ipaddress.ip_address(address)
    except ValueError:
        return False
    return True


# ---- paths ------------------------------------------------------------------------

_PATH_FMT = r"/[^\s{};\\]*"
_PATH_MSG = "must start with / and must not include any whitespace character, `{`, `}` or `;`"


def path(value: str) -> list[str]:
    """A URI path as NIC's validatePath takes it, without quotes (ferryman)."""
    if value.startswith("//"):
        return ["protocol-relative URIs not allowed, must not start with '//'"]
    if ".." in re.split(r"[/\\]", value):
        return ["path traversal not allowed, path must not contain '..' segments"]
    if not re.fullmatch(_PATH_FMT, value, re.ASCII) or re.search(r"\s", value):
        return [regex_error(_PATH_MSG, _PATH_FMT, "/", "/path", "/path/subpath-123")]
    if bad := token(value, "path"):
        return bad
    return []


# ---- strings with NGINX variables ----------------------------------------------------

_VARIABLE = re.compile(r"\$\{([^}]*)\}")
_BRACES_MSG = "variables must be enclosed in curly braces, for example ${host}"


def _special_variable(name: str) -> list[str]:
    """NIC's $http_/$arg_/$cookie_/$jwt_claim_/$apikey_ variable families."""
    if name.startswith(("jwt_header", "jwt_claim")):
        family, sep, rest = name.partition("_")[2].partition("_")
        family = "jwt_" + family
    else:
        family, sep, rest = name.partition("_")
    if not sep:
        return ["is invalid variable"]
    if family in ("arg", "cookie"):
        return argument_name(rest) if family == "arg" else cookie_name(rest)
    if family in ("http", "apikey", "jwt_claim", "jwt_header"):
        if http_header_name(rest.replace("_", "-")) or "-" in rest:
            return ["a valid special variable must consists of alphanumeric characters or '_'"]
        return []
    return ["unknown special variable"]


def variables(
    value: str, special: Iterable[str], allowed: Collection[str]
) -> list[tuple[str, str]]:
    """NIC's validateStringWithVariables: (bad value, message) pairs.

    Every ``$`` must open a ``${name}``; names come from ``allowed`` or a
    ``special`` family prefix (``http_``, ``arg_``...).
    """
    if value.endswith("$"):
        return [(value, "must not end with $")]
    for i, c in enumerate(value):
        if c == "$" and (value[i + 1] != "{" or "}" not in value[i + 1 :]):
            return [(value, _BRACES_MSG)]
    out = []
    prefixes = tuple(special)
    for name in _VARIABLE.findall(value):
        if prefixes and name.startswith(prefixes):
            out += [(name, m) for m in _special_variable(name)]
        elif name not in allowed:
            shown = ", ".join(sorted(allowed))
            out.append(
                (
                    name,
                    f"'{name}' contains an invalid NGINX variable. Accepted variables are: {shown}",
                )
            )
    return out
