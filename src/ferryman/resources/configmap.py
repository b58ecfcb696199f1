"""NIC's ``nginx-config`` ConfigMap (``--nginx-configmaps ns/name``): its keys, parsed.

Each key is parsed on its own, as NIC's ``ParseConfigMap`` does, so one bad
value costs only that key: the caller keeps the key's last good value. Values
come back normalised (booleans ``true``/``false``, times in NIC's ``ParseTime``
form, sizes trimmed) so that a value written two ways is one value, and an edit
that changes only the spelling changes nothing downstream.

NIC passes many values through to nginx.conf unchecked (``worker-connections``,
``ssl-ciphers``, the timeouts, ...); here every value is held to the narrowest
alphabet NGINX gives it meaning in (``resources.validation``): nothing a
ConfigMap says can end a directive, open a block or start another directive.
The few free texts (``log-format``) are escaped into a quoted NGINX string.

Keys are of two kinds (``GLOBAL_KEYS``, ``ROUTE_KEYS``): global ones shape
nginx.conf alone; route-level ones are the defaults of every Ingress and
VirtualServer route, which ``nginx.org/*`` annotations override.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ferryman.resources import validation
from ferryman.resources.annotation_values import parse_add_header_key

# One key's parser: the raw value -> (normalised value, None) or (None, why).
Parser = Callable[[str], "tuple[str | None, str | None]"]

_GO_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_GO_FALSE = ("0", "f", "F", "FALSE", "false", "False")
# NIC's ParseTime (nginx.org/en/docs/syntax.html): units largest first, spaces
# allowed between them, a bare number is seconds. [0-9] and " ", not \d and \s:
# those take other scripts' digits and line breaks.
_N = "[0-9]{1,9}"
_TIME_RE = re.compile(
    rf"^({_N}y)?? *({_N}M)?? *({_N}w)?? *({_N}d)?? *({_N}h)?? *({_N}m)?? *({_N}s?)?? *({_N}ms)??$"
)
_SIZE_RE = re.compile(r"^[0-9]{1,9}[kKmM]?$")
_OFFSET_RE = re.compile(r"^[0-9]{1,12}[kKmMgG]?$")
_INT_RE = re.compile(r"^[+-]?[0-9]+$")
_PROXY_BUFFERS_RE = re.compile(r"^([0-9]{1,6}) ([0-9]{1,9})([kKmM]?)$")
# RFC 9110 token characters NGINX takes unquoted in a directive argument.
_HEADER_RE = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
# OpenSSL cipher-list characters (ciphers, aliases, !, +, -, @STRENGTH, ":").
_CIPHERS_RE = re.compile(r"^[A-Za-z0-9!+@:._=-]{1,2048}$")
_SSL_PROTOCOLS = ("SSLv2", "SSLv3", "TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3")
_ERROR_LOG_LEVELS = ("debug", "info", "notice", "warn", "error", "crit", "alert", "emerg")
# syslog:server=ADDRESS[,facility=..][,severity=..][,tag=..][,nohostname]
_SYSLOG_RE = re.compile(
    r"^syslog:server=(unix:/[A-Za-z0-9/._-]+|\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?"
    r"|[A-Za-z0-9.-]+(:[0-9]{1,5})?)(,(facility|severity|tag)=[A-Za-z0-9_]{1,32}|,nohostname)*$"
)
_LB_METHODS = ("least_conn", "ip_hash", "random", "random two", "random two least_conn")
_HASH_RE = re.compile(r"^hash (\$[A-Za-z0-9_]+)( consistent)?$")
_LOG_ESCAPES = ("default", "json", "none")
# The largest log-format NGINX is given (NIC has no limit; 64 KiB is far above
# any format and keeps nginx.conf small).
_LOG_FORMAT_MAX = 64 * 1024


def _go_quote(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def parse_bool(value: str) -> tuple[str | None, str | None]:
    """Go's strconv.ParseBool, as NIC reads every boolean key."""
    if value in _GO_TRUE:
        return "true", None
    if value in _GO_FALSE:
        return "false", None
    return (
        None,
        f"contains invalid bool: strconv.ParseBool: parsing {_go_quote(value)}: invalid syntax",
    )


def _integer(low: int, high: int) -> Parser:
    def parse(value: str) -> tuple[str | None, str | None]:
        if not _INT_RE.fullmatch(value):
            return None, (
                f"contains invalid integer: strconv.Atoi: parsing {_go_quote(value)}: "
                "invalid syntax"
            )
        number = int(value)
        if not low <= number <= high:
            return None, f"must be between {low} and {high}"
        return str(number), None

    return parse


def parse_time(value: str) -> tuple[str | None, str | None]:
    """NIC's ParseTime: "1m 30s" -> "1m30s", "30" -> "30s"."""
    if not value.strip() or len(value) > 64 or not (m := _TIME_RE.fullmatch(value)):
        return None, f"invalid time string {_go_quote(value)}"
    parts = list(m.groups(default=""))
    if parts[6] and not parts[6].endswith("s"):
        parts[6] += "s"
    return "".join(parts), None


def parse_size(value: str) -> tuple[str | None, str | None]:
    """NIC's ParseSize: a number with an optional k or m."""
    trimmed = value.strip()
    if not _SIZE_RE.fullmatch(trimmed):
        return None, f"invalid size string {_go_quote(value)}"
    return trimmed, None


def parse_offset(value: str) -> tuple[str | None, str | None]:
    """An NGINX offset (client_max_body_size): a number with k, m or g."""
    trimmed = value.strip()
    if not _OFFSET_RE.fullmatch(trimmed):
        return None, f"invalid size string {_go_quote(value)}"
    return trimmed, None


def parse_proxy_buffers(value: str) -> tuple[str | None, str | None]:
    """NIC's ParseProxyBuffersSpec: "<number> <size>"."""
    m = _PROXY_BUFFERS_RE.fullmatch(value.strip())
    if m is None or int(m.group(1)) < 2:
        return None, f"invalid proxy buffers string {_go_quote(value)}"
    return f"{m.group(1)} {m.group(2)}{m.group(3).lower()}", None


def _one_of(choices: tuple[str, ...]) -> Parser:
    def parse(value: str) -> tuple[str | None, str | None]:
        trimmed = value.strip()
        if trimmed not in choices:
            return None, f"must be one of {', '.join(choices)}, got {_go_quote(value)}"
        return trimmed, None

    return parse


def parse_worker_processes(value: str) -> tuple[str | None, str | None]:
    if validation.worker_processes(value) is None:
        return value, None
    return None, (
        f"contains invalid integer: strconv.Atoi: parsing {_go_quote(value)}: invalid syntax"
    )


def parse_cpu_affinity(value: str) -> tuple[str | None, str | None]:
    trimmed = " ".join(value.split())
    if re.fullmatch(r"(auto)?( ?[01]{1,64}){0,64}", trimmed) and trimmed:
        return trimmed, None
    return None, f"must be auto or CPU bitmasks, got {_go_quote(value)}"


def parse_keepalive_timeout(value: str) -> tuple[str | None, str | None]:
    """``keepalive_timeout timeout [header_timeout]``."""
    parts = value.split()
    if not 1 <= len(parts) <= 2:
        return None, f"invalid time string {_go_quote(value)}"
    out = []
    for part in parts:
        time, why = parse_time(part)
        if time is None:
            return None, why
        out.append(time)
    return " ".join(out), None


def parse_header_list(value: str) -> tuple[str | None, str | None]:
    """A comma-separated list of header names (NIC splits on ",")."""
    names = [n.strip() for n in value.split(",")]
    names = [n for n in names if n]
    bad = [n for n in names if not _HEADER_RE.fullmatch(n)]
    if bad or not names:
        return None, f"invalid header name(s): {', '.join(_go_quote(b) for b in bad) or '(none)'}"
    return ",".join(names), None


def parse_header_name(value: str) -> tuple[str | None, str | None]:
    trimmed = value.strip()
    if not _HEADER_RE.fullmatch(trimmed):
        return None, f"invalid header name {_go_quote(value)}"
    return trimmed, None


def parse_addresses(value: str) -> tuple[str | None, str | None]:
    """``set-real-ip-from``: comma-separated addresses or CIDRs."""
    out = []
    for item in (i.strip() for i in value.split(",")):
        if not item:
            continue
        try:
            out.append(str(ipaddress.ip_network(item, strict=False)))
        except ValueError:
            return None, f"invalid address or CIDR {_go_quote(item)}"
    if not out:
        return None, "no address given"
    return ",".join(out), None


_HOSTNAME_RE = re.compile(
    r"^(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$"
)


def parse_status_addresses(value: str) -> tuple[str | None, str | None]:
    """``external-status-address``: comma-separated IP addresses or host names,
    what Ingress status (and VirtualServers' externalEndpoints) show."""
    out = []
    for item in (i.strip() for i in value.split(",")):
        if not item:
            continue
        try:
            out.append(str(ipaddress.ip_address(item)))
        except ValueError:
            if not _HOSTNAME_RE.fullmatch(item):
                return None, f"invalid address or host name {_go_quote(item)}"
            out.append(item)
    if not out:
        return None, "no address given"
    return ",".join(out), None


def parse_ssl_protocols(value: str) -> tuple[str | None, str | None]:
    parts = value.split()
    bad = [p for p in parts if p not in _SSL_PROTOCOLS]
    if bad or not parts:
        return None, (
            f"invalid protocol(s) {', '.join(_go_quote(b) for b in bad) or '(none)'}: "
            f"must be among {' '.join(_SSL_PROTOCOLS)}"
        )
    return " ".join(dict.fromkeys(parts)), None


def parse_ciphers(value: str) -> tuple[str | None, str | None]:
    trimmed = value.strip("\n").strip()
    if not _CIPHERS_RE.fullmatch(trimmed):
        return None, "must be an OpenSSL cipher list (letters, digits and ! + @ : . _ = -)"
    return trimmed, None


def parse_dhparam(value: str) -> tuple[str | None, str | None]:
    text = value.strip("\n").strip()
    body = text.removeprefix("-----BEGIN DH PARAMETERS-----").removesuffix(
        "-----END DH PARAMETERS-----"
    )
    if body == text or not re.fullmatch(r"[A-Za-z0-9+/=\s]{1,16384}", body):
        return None, "must be PEM DH parameters (-----BEGIN DH PARAMETERS-----)"
    return text + "\n", None


def parse_access_log(value: str) -> tuple[str | None, str | None]:
    """NIC takes only ``syslog:...`` (then optionally a format name)."""
    parts = value.split()
    if (
        not 1 <= len(parts) <= 2
        or not _SYSLOG_RE.fullmatch(parts[0])
        or (len(parts) == 2 and parts[1] not in ("main", "combined"))
    ):
        return None, f"invalid value for 'access-log': {_go_quote(value)}"
    return " ".join(parts), None


def parse_log_format(value: str) -> tuple[str | None, str | None]:
    """Lines of a log format (NIC splits on newlines); any text but control
    characters: each line is escaped into a quoted NGINX string when rendered."""
    if len(value) > _LOG_FORMAT_MAX:
        return None, f"is longer than {_LOG_FORMAT_MAX} characters"
    if any((ord(c) < 32 and c != "\n") or ord(c) == 127 for c in value):
        return None, "must not contain control characters"
    if not value.strip():
        return None, "must not be empty"
    return value, None


def parse_lb_method(value: str) -> tuple[str | None, str | None]:
    """NIC's ParseLBMethod (NGINX OSS methods)."""
    method = value.strip()
    if method == "round_robin" or method in _LB_METHODS or _HASH_RE.fullmatch(method):
        return method, None
    return None, f"Invalid value for the lb-method key: got {_go_quote(value)}"


def parse_redirect_code(value: str) -> tuple[str | None, str | None]:
    if value.strip() in ("301", "302", "307", "308"):
        return value.strip(), None
    return None, f"Invalid value for 'http-redirect-code': {_go_quote(value)}"


_REDIRECTS = ("301", "302", "303", "307", "308")
# A redirect's target as NGINX's return writes it to Location: absolute or
# rooted, printable ASCII without spaces.
_RETURN_URL_RE = re.compile(r"^(https?://[!-~]+|/[!-~]*)$")
_RETURN_TEXT_MAX = 1024


def parse_default_server_return(value: str) -> tuple[str | None, str | None]:
    """NGINX's ``return`` in NIC's default server: ``CODE [TEXT]``, ``CODE URL``
    for 301/302/303/307/308, or ``URL`` alone (a 302). Normalised to ``CODE`` or
    ``CODE REST``; the data plane answers it (ferryman.lua), so the text is never
    configuration."""
    text = value.strip()
    why = (
        f"Invalid value for 'default-server-return': {_go_quote(value)}: expected "
        "a status code (200-599, or 444) and a text, or a redirect code and a URL"
    )
    if any(ord(c) < 32 or ord(c) == 127 for c in text) or len(text) > _RETURN_TEXT_MAX:
        return None, why
    if text.startswith(("http://", "https://")):
        return (f"302 {text}", None) if _RETURN_URL_RE.fullmatch(text) else (None, why)
    code, _, rest = text.partition(" ")
    rest = rest.strip()
    if not (code.isascii() and code.isdigit() and (200 <= int(code) <= 599 or code == "444")):
        return None, why
    if code in _REDIRECTS and rest and not _RETURN_URL_RE.fullmatch(rest):
        return None, why
    if code == "444" and rest:
        return None, why  # NGINX closes the connection: there is nothing to send
    return (f"{code} {rest}" if rest else code), None


# The keys nginx.conf takes as a whole (main, events, http and the server).
GLOBAL_KEYS: Mapping[str, Parser] = {
    "worker-processes": parse_worker_processes,
    "worker-connections": _integer(16, 1048576),
    "worker-rlimit-nofile": _integer(1, 16777216),
    "worker-cpu-affinity": parse_cpu_affinity,
    "worker-shutdown-timeout": parse_time,
    "keepalive-timeout": parse_keepalive_timeout,
    "keepalive-requests": _integer(0, 2**31 - 1),
    "error-log-level": _one_of(_ERROR_LOG_LEVELS),
    "log-format": parse_log_format,
    "log-format-escaping": _one_of(_LOG_ESCAPES),
    "stream-log-format": parse_log_format,
    "stream-log-format-escaping": _one_of(_LOG_ESCAPES),
    "access-log": parse_access_log,
    "access-log-off": parse_bool,
    "ssl-protocols": parse_ssl_protocols,
    "ssl-ciphers": parse_ciphers,
    "ssl-prefer-server-ciphers": parse_bool,
    "ssl-dhparam-file": parse_dhparam,
    "http2": parse_bool,
    "proxy-protocol": parse_bool,
    "set-real-ip-from": parse_addresses,
    "real-ip-header": parse_header_name,
    "real-ip-recursive": parse_bool,
    "server-names-hash-bucket-size": _integer(32, 65536),
    "server-names-hash-max-size": _integer(32, 1048576),
    "map-hash-bucket-size": _integer(32, 65536),
    "map-hash-max-size": _integer(32, 1048576),
    "variables-hash-bucket-size": _integer(1, 65536),
    "variables-hash-max-size": _integer(32, 1048576),
    "client-body-buffer-size": parse_size,
}

# Defaults of every Ingress/VirtualServer route (annotations override them).
ROUTE_KEYS: Mapping[str, Parser] = {
    "proxy-connect-timeout": parse_time,
    "proxy-read-timeout": parse_time,
    "proxy-send-timeout": parse_time,
    "client-max-body-size": parse_offset,
    "proxy-buffering": parse_bool,
    "proxy-buffers": parse_proxy_buffers,
    "proxy-buffer-size": parse_size,
    "proxy-busy-buffers-size": parse_size,
    "proxy-max-temp-file-size": parse_size,
    "proxy-hide-headers": parse_header_list,
    "proxy-pass-headers": parse_header_list,
    "server-tokens": parse_bool,
    "hsts": parse_bool,
    "hsts-max-age": _integer(0, 2**63 - 1),
    "hsts-include-subdomains": parse_bool,
    "hsts-behind-proxy": parse_bool,
    # ferryman's (NIC always sends preload, its default here): ingress-nginx's
    # key, whose default is false, read from --ingress-nginx-configmap too.
    "hsts-preload": parse_bool,
    "redirect-to-https": parse_bool,
    "ssl-redirect": parse_bool,
    "http-redirect-code": parse_redirect_code,
    "default-server-return": parse_default_server_return,
    "add-header": parse_add_header_key,
    "lb-method": parse_lb_method,
    "max-fails": _integer(0, 2**31 - 1),
    "fail-timeout": parse_time,
    "keepalive": _integer(0, 2**31 - 1),
}

# Keys that shape neither nginx.conf nor routes: what status reports.
STATUS_KEYS: Mapping[str, Parser] = {
    "external-status-address": parse_status_addresses,
}

# NIC keys ferryman knows and does not take, with why (a Warning says so).
UNSUPPORTED: Mapping[str, str] = {
    **dict.fromkeys(
        (
            "main-snippets",
            "http-snippets",
            "location-snippets",
            "server-snippets",
            "stream-snippets",
        ),
        "snippets are off in ferryman: raw NGINX text is never taken from resources",
    ),
    **dict.fromkeys(
        ("main-template", "ingress-template", "virtualserver-template", "transportserver-template"),
        "ferryman renders its own templates; routing is not configuration text",
    ),
    "default-server-access-log-off": "ferryman has one server for every host, no separate "
    "default server",
    "upstream-zone-size": "ferryman's endpoints live in its own shared memory "
    "(--records-memory-size)",
    "add-header-inherit": "not implemented yet",
    "disable-forwarded-headers": "needs snippets in NIC; ferryman has no snippets",
    "resolver-addresses": "NGINX Plus only",
    "resolver-ipv6": "NGINX Plus only",
    "resolver-valid": "NGINX Plus only",
    "resolver-timeout": "NGINX Plus only",
    **dict.fromkeys(
        (
            "otel-exporter-endpoint",
            "otel-exporter-header-name",
            "otel-exporter-header-value",
            "otel-service-name",
            "otel-trace-in-http",
        ),
        "OpenTelemetry is not implemented",
    ),
    **{
        f"zone-sync{suffix}": "NGINX Plus only"
        for suffix in ("", "-port", "-resolver-addresses", "-resolver-ipv6", "-resolver-valid")
    },
    **{
        f"oidc-{what}-{field}": "NGINX Plus only (OIDC)"
        for what in ("pkce", "id-tokens", "access-tokens", "refresh-tokens", "sids")
        for field in ("timeout", "zone-size")
    },
    **{
        key: "NGINX App Protect is not available"
        for key in (
            "app-protect-compressed-requests-action",
            "app-protect-cookie-seed",
            "app-protect-cpu-thresholds",
            "app-protect-dos-arb-fqdn",
            "app-protect-dos-log-format",
            "app-protect-dos-log-format-escaping",
            "app-protect-failure-mode-action",
            "app-protect-physical-memory-util-thresholds",
            "app-protect-reconnect-period-seconds",
        )
    },
}

# Keys of ferryman's own, which NIC's ConfigMap does not have.
OWN_KEYS = frozenset({"hsts-preload"})

# The HSTS keys NIC takes or drops together.
HSTS_OPTIONS = ("hsts-max-age", "hsts-include-subdomains", "hsts-behind-proxy", "hsts-preload")


@dataclass(frozen=True)
class Parsed:
    """What a ConfigMap's data says: each good key's normalised value, and each
    bad or unsupported key's reason (NIC's Event text, minus the object's name)."""

    values: Mapping[str, str] = field(default_factory=dict)
    problems: Mapping[str, str] = field(default_factory=dict)


def parse_data(data: Mapping[str, object]) -> Parsed:
    """Parse every key of a ConfigMap's ``data`` (keys NIC does not know are
    ignored, as NIC ignores them)."""
    values: dict[str, str] = {}
    problems: dict[str, str] = {}
    parsers = {**GLOBAL_KEYS, **ROUTE_KEYS, **STATUS_KEYS}
    for key, raw in sorted(data.items()):
        if key in UNSUPPORTED:
            problems[key] = f"is not supported by ferryman ({UNSUPPORTED[key]}), ignoring"
            continue
        parser = parsers.get(key)
        if parser is None:
            continue
        if not isinstance(raw, str):
            problems[key] = "must be a string, ignoring"
            continue
        value, why = parser(raw)
        if value is None:
            problems[key] = f"{why}, ignoring"
        else:
            values[key] = value
    if "hsts" in values and any(k in problems for k in HSTS_OPTIONS):
        # NIC: "there are configuration issues with HSTS settings, ignoring all HSTS options".
        problems["hsts"] = (
            "there are configuration issues with HSTS settings, ignoring all HSTS options"
        )
        del values["hsts"]
    return Parsed(values, problems)
