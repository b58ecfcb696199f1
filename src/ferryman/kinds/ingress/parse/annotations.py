"""NIC's ``nginx.org/*`` Ingress annotations: which exist, and NIC's validation.

NIC validates each annotation it knows (internal/k8s/validation.go,
``annotationValidations``) and rejects the Ingress with Kubernetes' field
errors, e.g. ``annotations.nginx.org/proxy-connect-timeout: Invalid value:
"abc": must be a time``; an annotation it does not know is ignored. ferryman
rejects with the same messages, and makes an unknown ``nginx.org/*``
annotation (a typo NIC would ignore silently) a ``Warning``.

Each annotation's value parser (``annotation_values.py``) also reads the
ConfigMap key of the same name (``kinds/ingress/records/options.py``: annotation >
ConfigMap > built-in default), so both are read alike.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ferryman.kinds.ingress.parse import proxy_redirect
from ferryman.kinds.ingress.parse.sticky import parse_sticky_services
from ferryman.resources.annotation_values import (
    BOOLS,
    ESCAPED,
    BadValue,
    parse_add_headers,
    parse_bool,
    parse_headers,
    parse_int,
    parse_lb_method,
    parse_limit_req_key,
    parse_mergeable,
    parse_next_upstream,
    parse_offset,
    parse_path_regex,
    parse_ports,
    parse_proxy_buffers,
    parse_realm,
    parse_redirect_code,
    parse_rewrites,
    parse_secret_name,
    parse_services,
    parse_set_headers,
    parse_size,
    parse_time_ms,
    parse_uint,
)
from ferryman.resources.nic_fields import TOO_MANY, Problem, forbidden, invalid, required
from ferryman.resources.pcre import pcre_error

PREFIX = "nginx.org/"
MERGEABLE = PREFIX + "mergeable-ingress-type"
PATH_REGEX = PREFIX + "path-regex"


def too_many(where: str, actual: int, limit: int) -> Problem:
    """Kubernetes' field.TooMany, as NIC's master and minion checks report it."""
    return Problem(where, TOO_MANY, f"must have at most {limit} items", actual)


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
    "rewrite-target": Known(lambda v: parse_rewrite_target(v)),
    "app-root": Known(lambda v: parse_app_root(v)),
    "use-cluster-ip": Known(parse_bool, required=False),
    "policies": Known(_text),
    "proxy-set-headers": Known(lambda v: parse_set_headers(v)),
    "add-header": Known(lambda v: parse_add_headers(v)),
    "limit-req-key": Known(parse_limit_req_key),
    "sticky-cookie-services": Known(_nic(parse_sticky_services)),
    "proxy-redirect-from": Known(_nic(proxy_redirect.parse_from)),
    "proxy-redirect-to": Known(_nic(proxy_redirect.parse_to)),
    # Parsed with the Ingress's options (kinds/ingress/records/limit_req.py): NIC only
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
# yet: accepted (not validated) with a Warning naming them (``kinds/ingress/records/options.py``).
OTHER_NIC = frozenset(
    [
        "add-header-inherit",
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
        if known.related == "hsts" and annotations[related] not in BOOLS:
            shown = annotations[related]
            return forbidden(
                where,
                f"related annotation {related}: "
                f'strconv.ParseBool: parsing "{shown}": invalid syntax',
            )
    if known.required and value == "":
        return required(where)
    return None


def _nic_path(value: str) -> None:
    """NIC's common ValidatePath: a path, not protocol-relative, without '..'."""
    if not value.startswith("/"):
        raise BadValue("must start with '/'")
    if value.startswith("//"):
        raise BadValue("protocol-relative URIs not allowed, must not start with '//'")
    if ".." in re.split(r"[/\\]", value):
        raise BadValue("path traversal not allowed, path must not contain '..' segments")
    if re.search(r"\s", value):
        raise BadValue("must not include any whitespace character")


def parse_rewrite_target(value: str) -> str:
    """NIC's validateRewriteTargetAnnotation."""
    if value.startswith(("http://", "https://")):
        raise BadValue("absolute URLs not allowed in rewrite target")
    _nic_path(value)
    if any(c in value for c in ";{}[]|<>,^`~"):
        raise BadValue(
            "NGINX configuration syntax characters (;{}) and []|<>,^`~ not allowed in "
            "rewrite target"
        )
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise BadValue("control characters not allowed in rewrite target")
    return value


_RFC1738_FORBIDDEN = set(' \t\n\r\f\v{};$|^<>\\"#[]')


def parse_app_root(value: str) -> str:
    """NIC's validateAppRootAnnotation."""
    if value == "/":
        raise BadValue("cannot be '/'")
    _nic_path(value)
    if any(c in _RFC1738_FORBIDDEN for c in value):
        raise BadValue(
            "path must not contain the following characters: whitespace, '{', '}', ';', "
            "'$', '|', '^', '<', '>', '\\', '\"', '#', '[', ']'"
        )
    if "~" in value:
        raise BadValue("path must not contain the '~' character")
    if value.endswith("/"):
        raise BadValue("path should not end with '/'")
    return value


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
    if (error := pcre_error(path)) is not None:
        return f"must be a valid regular expression: {error}"
    if not ESCAPED.fullmatch(path):
        return (
            "must have all '\"' (double quotes) escaped and must not end with an "
            "unescaped '\\' (backslash)"
        )
    if any(re.search("[A-Za-z]", inner) for inner in _BRACES.findall(path)):
        return "must not include curly braces containing alphabetical characters"
    if _ILLEGAL.search(path):
        return "must not contain invalid paths"
    return None
