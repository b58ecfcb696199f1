"""NIC's ``nginx.org/*`` Ingress annotations: which exist, and NIC's validation.

NIC validates each annotation it knows (internal/k8s/validation.go,
``annotationValidations``) and rejects the Ingress with Kubernetes' field
errors, e.g. ``annotations.nginx.org/proxy-connect-timeout: Invalid value:
"abc": must be a time``; an annotation it does not know is ignored. ferryman
rejects with the same messages, and makes an unknown ``nginx.org/*``
annotation (a typo NIC would ignore silently) a ``Warning``.

Each value parser here also reads the ConfigMap key of the same name
(``configs/ingress_options.py``: annotation > ConfigMap > built-in default),
so both are read alike.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ferryman.resources import ingress_proxy_redirect as proxy_redirect
from ferryman.resources import nic_rules
from ferryman.resources.ingress_sticky import parse_sticky_services
from ferryman.resources.nic_fields import TOO_MANY, Problem, forbidden, invalid, required
from ferryman.resources.nic_upstream import NEXT_UPSTREAM

PREFIX = "nginx.org/"
MERGEABLE = PREFIX + "mergeable-ingress-type"
PATH_REGEX = PREFIX + "path-regex"

_BOOLS = {
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
LB_METHODS = (
    "round_robin",
    "least_conn",
    "ip_hash",
    "random",
    "random two",
    "random two least_conn",
)
_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_UINT = re.compile(r"\+?[0-9]+", re.ASCII)
_PROXY_BUFFERS = re.compile(r"([0-9]+) ([0-9]+)([kKmM]?)", re.ASCII)
_REWRITE_PATH = re.compile(r"/[^\s{};$]*")
_ESCAPED = re.compile(r'([^"\\]|\\.)*', re.S)


def too_many(where: str, actual: int, limit: int) -> Problem:
    """Kubernetes' field.TooMany, as NIC's master and minion checks report it."""
    return Problem(where, TOO_MANY, f"must have at most {limit} items", actual)


class BadValue(ValueError):
    """A value an annotation (or ConfigMap key) does not take; ``str`` is NIC's detail."""


def parse_bool(value: str) -> bool:
    if value not in _BOOLS:
        raise BadValue("must be a boolean")
    return _BOOLS[value]


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
    if not _ESCAPED.fullmatch(value):
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


def _nic(parse: Callable[[str], object]) -> Callable[[str], object]:
    """A parser of another module (whose ValueError carries NIC's message) as a
    value parser here."""

    def parsed(value: str) -> object:
        try:
            return parse(value)
        except ValueError as e:
            raise BadValue(str(e)) from None

    return parsed


def _text(value: str) -> str:
    return value


Parser = Callable[[str], object]


@dataclass(frozen=True)
class Known:
    """One annotation NIC validates: its value parser and NIC's extra rules."""

    parse: Parser
    required: bool = True  # NIC's validateRequiredAnnotation: "" is refused
    related: str | None = None  # an annotation that must be set (and a boolean) too
    services: bool = False  # names Services that the Ingress must route to
    hostless_forbidden: bool = False


# Key names without the prefix; these are also the ConfigMap's key names.
KNOWN: Mapping[str, Known] = {
    "mergeable-ingress-type": Known(parse_mergeable),
    "lb-method": Known(parse_lb_method),
    "server-tokens": Known(parse_bool, required=False),
    "server-snippets": Known(_text, required=False),
    "location-snippets": Known(_text, required=False),
    "proxy-connect-timeout": Known(parse_time_ms),
    "proxy-read-timeout": Known(parse_time_ms),
    "proxy-send-timeout": Known(parse_time_ms),
    "proxy-hide-headers": Known(parse_headers, required=False),
    "proxy-pass-headers": Known(parse_headers, required=False),
    "client-max-body-size": Known(parse_offset),
    "client-body-buffer-size": Known(parse_size),
    "redirect-to-https": Known(parse_bool),
    "ssl-redirect": Known(parse_bool),
    "http-redirect-code": Known(parse_redirect_code),
    "proxy-buffering": Known(parse_bool),
    "hsts": Known(parse_bool),
    "hsts-max-age": Known(parse_int, related="hsts"),
    "hsts-include-subdomains": Known(parse_bool, related="hsts"),
    "hsts-behind-proxy": Known(parse_bool, related="hsts"),
    "proxy-buffers": Known(parse_proxy_buffers),
    "proxy-buffer-size": Known(parse_size),
    "proxy-busy-buffers-size": Known(parse_size, required=False),
    "proxy-max-temp-file-size": Known(parse_size),
    "proxy-next-upstream": Known(parse_next_upstream),
    "proxy-next-upstream-timeout": Known(parse_time_ms),
    "proxy-next-upstream-tries": Known(parse_uint),
    "upstream-zone-size": Known(parse_size),
    "basic-auth-secret": Known(parse_secret_name),
    "basic-auth-realm": Known(parse_realm, required=False, related="basic-auth-secret"),
    "listen-ports": Known(parse_ports, hostless_forbidden=True),
    "listen-ports-ssl": Known(parse_ports, hostless_forbidden=True),
    "keepalive": Known(parse_int),
    "max-fails": Known(parse_uint),
    "max-conns": Known(parse_uint),
    "fail-timeout": Known(parse_time_ms),
    "websocket-services": Known(parse_services, services=True),
    "ssl-services": Known(parse_services, services=True),
    "grpc-services": Known(parse_services, services=True),
    "rewrites": Known(parse_rewrites, services=True),
    "path-regex": Known(parse_path_regex, required=False),
    "use-cluster-ip": Known(parse_bool, required=False),
    "policies": Known(_text),
    "proxy-set-headers": Known(lambda v: parse_set_headers(v)),
    "add-header": Known(lambda v: parse_add_headers(v)),
    "limit-req-key": Known(parse_limit_req_key),
    "sticky-cookie-services": Known(_nic(parse_sticky_services)),
    "proxy-redirect-from": Known(_nic(proxy_redirect.parse_from)),
    "proxy-redirect-to": Known(_nic(proxy_redirect.parse_to)),
    # Parsed with the Ingress's options (configs/ingress_limit_req.py): NIC only
    # logs their bad values, so they warn there rather than reject.
    **dict.fromkeys(
        (
            "limit-req-rate",
            "limit-req-zone-size",
            "limit-req-delay",
            "limit-req-no-delay",
            "limit-req-burst",
            "limit-req-dry-run",
            "limit-req-log-level",
            "limit-req-reject-code",
            "limit-req-scale",
        ),
        Known(_text, required=False),
    ),
}
# Known to NIC (validated or read), recognised here, applied by no part of ferryman
# yet: accepted (not validated) with a Warning naming them (``configs/ingress_options.py``).
OTHER_NIC = frozenset(
    [
        "add-header-inherit",
        "rewrite-target",
        "app-root",
        "custom-http-errors",
        "ssl-ciphers",
        "ssl-prefer-server-ciphers",
    ]
)


# NIC's annotations for NGINX Plus (its validatePlusOnlyAnnotation): on open-source
# NGINX, which ferryman drives, NIC rejects the Ingress, and so does ferryman
# rather than serve it without the health checks, JWT validation or
# persistence asked for.
PLUS_ONLY = frozenset(
    "nginx.com/" + key
    for key in (
        "health-checks",
        "health-checks-mandatory",
        "health-checks-mandatory-queue",
        "slow-start",
        "jwt-key",
        "jwt-realm",
        "jwt-token",
        "jwt-login-url",
        "sticky-cookie-services",
        "policies",
    )
)
# Annotations read only by NIC's custom templates (its custom-annotations
# example); ferryman renders no user templates.
CUSTOM = "custom.nginx.org/"


def parse_value(key: str, value: str) -> object:
    """``value`` of annotation (or ConfigMap key) ``key`` parsed; BadValue if invalid."""
    return KNOWN[key].parse(value)


def validate(
    annotations: Mapping[str, str], services: frozenset[str], hostless: bool
) -> tuple[dict[str, object], list[Problem], list[str]]:
    """NIC's validateIngressAnnotations: the parsed ``nginx.org/*`` values (key
    without the prefix), the problems that reject the Ingress (in NIC's order:
    annotation names sorted, the first failing rule of each; NGINX Plus's
    ``nginx.com/*`` ones forbidden), and warnings for unknown ``nginx.org/*``
    annotations and for ``custom.nginx.org/*`` ones."""
    parsed: dict[str, object] = {}
    problems: list[Problem] = []
    warnings: list[str] = []
    for name in sorted(annotations):
        if name in PLUS_ONLY:
            problems.append(forbidden(f"annotations.{name}", "annotation requires NGINX Plus"))
            continue
        if name.startswith(CUSTOM):
            warnings.append(
                f"annotation {name}: custom annotations take effect through NIC's custom "
                "templates, which ferryman does not have: ignored"
            )
            continue
        if not name.startswith(PREFIX):
            continue
        key = name.removeprefix(PREFIX)
        value = annotations[name]
        known = KNOWN.get(key)
        if known is None:
            if key not in OTHER_NIC:
                warnings.append(f"annotation {name} is not a NIC annotation: ignored")
            continue
        where = f"annotations.{name}"
        problem = _check(known, annotations, where, value, services, hostless)
        if problem is not None:
            problems.append(problem)
            continue
        try:
            parsed[key] = known.parse(value)
        except BadValue as e:
            problems.append(invalid(where, value, str(e)))
            continue
        if known.services:
            names = parsed[key]
            assert isinstance(names, frozenset | dict)
            unknown = sorted(s for s in names if s not in services)
            if unknown:
                lead = "" if key == "rewrites" else "must be a comma-separated list of services. "
                detail = f"{lead}The following services were not found: {','.join(unknown)}"
                problems.append(invalid(where, value, detail))
                del parsed[key]
    pair = proxy_redirect.pair_problem(annotations)
    if pair is not None:
        problems.append(pair)
    return parsed, problems, warnings


def _check(
    known: Known,
    annotations: Mapping[str, str],
    where: str,
    value: str,
    services: frozenset[str],
    hostless: bool,
) -> Problem | None:
    if known.hostless_forbidden and hostless:
        return forbidden(where, "annotation is not supported for hostless Ingress")
    if known.related is not None:
        related = PREFIX + known.related
        if related not in annotations:
            return forbidden(where, f"related annotation {related}: must be set")
        if known.related == "hsts" and annotations[related] not in _BOOLS:
            shown = annotations[related]
            return forbidden(
                where,
                f"related annotation {related}: "
                f'strconv.ParseBool: parsing "{shown}": invalid syntax',
            )
    if known.required and value == "":
        return required(where)
    return None


_REGEX_PATH = re.compile(r"/[^\s;]*")
_BRACES = re.compile(r"\{(.*?)\}")
_ILLEGAL = re.compile(r"^/etc/|^/root(?:/|$)|^/var(?:/|$)|\\n|\\r$")


def regex_path(path: str) -> str | None:
    """NIC's validatePath for an Ingress path that is a regular expression
    (``nginx.org/path-regex``); the problem, or None."""
    if path.startswith("//"):
        return "protocol-relative URIs not allowed, must not start with '//'"
    if ".." in re.split(r"[/\\]", path):
        return "path traversal not allowed, path must not contain '..' segments"
    if not _REGEX_PATH.fullmatch(path):
        return "must start with / and must not include any whitespace character or `;`"
    try:
        re.compile(path)
    except re.error as e:
        return f"must be a valid regular expression: {e}"
    if not _ESCAPED.fullmatch(path):
        return (
            "must have all '\"' (double quotes) escaped and must not end with an "
            "unescaped '\\' (backslash)"
        )
    if any(re.search("[A-Za-z]", inner) for inner in _BRACES.findall(path)):
        return "must not include curly braces containing alphabetical characters"
    if _ILLEGAL.search(path):
        return "must not contain invalid paths"
    return None
