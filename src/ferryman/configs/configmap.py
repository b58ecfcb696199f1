"""The ConfigMap's keys as nginx.conf settings, and the state kept between edits.

``Tuning`` is what nginx.conf.tmpl (and angie.conf.tmpl) render from the keys;
its defaults are ferryman's own constants, so without a ConfigMap nginx.conf is
exactly what it always was. Every string in it has passed
``resources.configmap`` (an alphabet NGINX gives no meaning to) or was quoted by
``validation.nginx_single_quoted``.

``ConfigMapState`` keeps the values in force: a bad key keeps its last good
value (its default the first time), the others apply. It is pure: it returns the
Events to report (NIC's reasons and words) and the caller renders and reloads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ferryman.configs.ingress_nginx_configmap import merged
from ferryman.configs.record_text import b64
from ferryman.resources import nic_rules, validation
from ferryman.resources.annotation_values import parse_add_headers
from ferryman.resources.configmap import (
    GLOBAL_KEYS,
    HSTS_OPTIONS,
    ROUTE_KEYS,
    Parsed,
    parse_data,
)

# Global keys that routes read as well, so their change renders every route
# again: http2 (gRPC routes need it, kinds/virtualserver/records/grpc.py and ingress_options.py).
_ROUTES_READ = frozenset(["http2"])

# NIC's event reasons for its ConfigMap (internal/logger/events.go).
INVALID_VALUE = "InvalidValue"
# A key of ingress-nginx's ConfigMap ferryman does not apply (--ingress-nginx-configmap).
NOT_APPLIED = "NotApplied"
UPDATED = "Updated"
UPDATED_WITH_ERROR = "UpdatedWithError"

# NIC's main format, used when the ConfigMap gives none (nginx.tmpl).
DEFAULT_LOG_FORMAT = (
    "'$remote_addr - $remote_user [$time_local] \"$request\" '",
    "'$status $body_bytes_sent \"$http_referer\" '",
    '\'"$http_user_agent" "$http_x_forwarded_for"\'',
)
# NIC's stream-log-format default, for TransportServers' connections.
DEFAULT_STREAM_LOG_FORMAT = (
    "'$remote_addr [$time_local] '",
    "'$protocol $status $bytes_sent $bytes_received '",
    "'$session_time \"$ssl_preread_server_name\"'",
)
# Where access lines go when logging is on and no syslog: is named: NGINX's
# stderr, which ferryman forwards to its own log (NGINX's stdout is closed).
DEFAULT_ACCESS_LOG = "/dev/stderr main"
# The keys taken or kept together: NIC ignores all HSTS options when one is bad.
GROUPS = (("hsts", *HSTS_OPTIONS),)
# http-level directives that take a key's value as it is.
_PLAIN_DIRECTIVES = (
    ("keepalive-requests", "keepalive_requests"),
    ("client-body-buffer-size", "client_body_buffer_size"),
    ("map-hash-bucket-size", "map_hash_bucket_size"),
    ("map-hash-max-size", "map_hash_max_size"),
    ("variables-hash-bucket-size", "variables_hash_bucket_size"),
    ("variables-hash-max-size", "variables_hash_max_size"),
    ("proxy-connect-timeout", "proxy_connect_timeout"),
    ("proxy-read-timeout", "proxy_read_timeout"),
    ("proxy-send-timeout", "proxy_send_timeout"),
    ("proxy-buffers", "proxy_buffers"),
    ("proxy-buffer-size", "proxy_buffer_size"),
    ("proxy-busy-buffers-size", "proxy_busy_buffers_size"),
    ("proxy-max-temp-file-size", "proxy_max_temp_file_size"),
)
# Route-level keys nginx.conf itself applies (http or server level) to every route
# that does not set its own: a route whose resolved value is the ConfigMap's needs
# no per-route handling (no slow path) for these. The others (lb-method,
# max-fails, fail-timeout, keepalive, ssl-redirect, http-redirect-code for
# ssl-redirect) only reach routes through the annotations' resolution.
IN_NGINX_CONF = frozenset(
    {
        "proxy-connect-timeout",
        "proxy-read-timeout",
        "proxy-send-timeout",
        "client-max-body-size",
        "proxy-buffering",
        "proxy-buffers",
        "proxy-buffer-size",
        "proxy-busy-buffers-size",
        "proxy-max-temp-file-size",
        "proxy-hide-headers",
        "proxy-pass-headers",
        "server-tokens",
        "hsts",
        "hsts-max-age",
        "hsts-include-subdomains",
        "hsts-behind-proxy",
        "hsts-preload",
        "redirect-to-https",
        "add-header",
    }
)
# proxy-connect-timeout when the ConfigMap sets none. NGINX's own, 60s, is how
# long a request waits on the address of a pod that is gone (SYNs dropped, no
# RST) before proxy_next_upstream moves it on; 2s lets a live peer's connect
# survive one lost SYN (Linux retransmits it after 1 s) and leaves a client
# with a 5 s timeout 3 s for the retry (docs/operations.md, "Connect timeout").
DEFAULT_PROXY_CONNECT_TIMEOUT = "2s"
# ferryman's values for _PLAIN_DIRECTIVES' keys the ConfigMap leaves out.
_PLAIN_DEFAULTS = {"proxy-connect-timeout": DEFAULT_PROXY_CONNECT_TIMEOUT}
# The file ssl-dhparam-file's content is written to, in the state directory.
DHPARAM_FILE = "dhparam.pem"


@dataclass(frozen=True)
class Tuning:
    """nginx.conf's settings from the ConfigMap; the defaults are ferryman's."""

    worker_processes: str = ""  # "": --worker-processes
    worker_shutdown_timeout: str = ""  # "": --worker-shutdown-timeout
    worker_connections: str = "16384"
    worker_rlimit_nofile: str = ""
    worker_cpu_affinity: str = ""
    error_log_level: str = "notice"
    # log_format main: quoted strings, and its escape= ("" for NGINX's default).
    log_format: tuple[str, ...] = DEFAULT_LOG_FORMAT
    log_format_escape: str = ""
    access_log: str = "off"
    # The stream block's log_format stream-main (TransportServers, TLS
    # passthrough), logged where access_log logs, when it is on.
    stream_log_format: tuple[str, ...] = DEFAULT_STREAM_LOG_FORMAT
    stream_log_format_escape: str = ""
    keepalive_timeout: str = "65s"
    server_tokens: str = "off"
    client_max_body_size: str = "1m"
    server_names_hash_bucket_size: str = ""
    server_names_hash_max_size: str = ""
    # (directive, value) pairs at http level, in a fixed order.
    directives: tuple[tuple[str, str], ...] = (
        ("proxy_connect_timeout", DEFAULT_PROXY_CONNECT_TIMEOUT),
    )
    proxy_buffering: str = ""  # "", "on" or "off"
    hide_headers: tuple[str, ...] = ()
    pass_headers: tuple[str, ...] = ()
    ssl_protocols: str = "TLSv1.2 TLSv1.3"
    ssl_ciphers: str = ""
    ssl_prefer_server_ciphers: bool = False
    ssl_dhparam: bool = False
    http2: bool = False
    proxy_protocol: bool = False
    real_ip_from: tuple[str, ...] = ()
    real_ip_header: str = ""
    real_ip_recursive: bool = False
    hsts: str = ""  # the Strict-Transport-Security value; "": off
    hsts_behind_proxy: bool = False
    redirect_to_https: bool = False
    redirect_code: str = "301"
    # add-header: (name, value, always), server-level add_header lines whose
    # values a route that adds headers of its own empties (tuning-http.conf.tmpl).
    add_headers: tuple[tuple[str, str, bool], ...] = ()
    # default-server-return, base64 ("": 404): NGINX would read "$" in a set
    # value as a variable, base64 has none (ferryman.lua decodes it).
    default_server_return: str = ""

    @property
    def stream_access_log(self) -> str:
        """The stream block's access_log: the http one's target with the
        stream-main format ("off" when access logging is off)."""
        if self.access_log == "off":
            return "off"
        return f"{self.access_log.split()[0]} stream-main"

    @property
    def client_max_body_bytes(self) -> int:
        """client_max_body_size in bytes (0: none): the default the data plane
        checks itself, since the router's location takes any body."""
        size = nic_rules.offset_bytes(self.client_max_body_size.strip())
        return 1 << 20 if size is None else size


def _on(values: Mapping[str, str], key: str) -> bool:
    return values.get(key) == "true"


def _log_format(text: str) -> tuple[str, ...]:
    """NIC's rendering: one quoted string per non-empty line, lines after the
    first with a leading space."""
    lines = [line for line in text.split("\n") if line]
    return tuple(
        validation.nginx_single_quoted((" " if i else "") + line) for i, line in enumerate(lines)
    )


def _access_log(values: Mapping[str, str]) -> str:
    off = values.get("access-log-off")
    if off == "true" or (off is None and "access-log" not in values):
        return "off"  # ferryman's default (NIC's is on)
    return values.get("access-log", DEFAULT_ACCESS_LOG)


def _hsts(values: Mapping[str, str]) -> str:
    if not _on(values, "hsts"):
        return ""
    age = values.get("hsts-max-age", "2592000")  # NIC's default, 30 days
    subdomains = "; includeSubDomains" if _on(values, "hsts-include-subdomains") else ""
    return f"max-age={age}{subdomains}{hsts_preload(values)}"


def hsts_preload(values: Mapping[str, str]) -> str:
    """The header's "; preload": NIC always sends it; ``hsts-preload: false``
    (ingress-nginx's default, with its ConfigMap) leaves it out."""
    return "" if values.get("hsts-preload") == "false" else "; preload"


def tuning(values: Mapping[str, str]) -> Tuning:
    """The settings ``values`` (parsed, normalised keys) give nginx.conf."""
    defaults = Tuning()
    buffering = values.get("proxy-buffering")
    return Tuning(
        worker_processes=values.get("worker-processes", ""),
        worker_shutdown_timeout=values.get("worker-shutdown-timeout", ""),
        worker_connections=values.get("worker-connections", defaults.worker_connections),
        worker_rlimit_nofile=values.get("worker-rlimit-nofile", ""),
        worker_cpu_affinity=values.get("worker-cpu-affinity", ""),
        error_log_level=values.get("error-log-level", defaults.error_log_level),
        log_format=_log_format(values["log-format"])
        if "log-format" in values
        else DEFAULT_LOG_FORMAT,
        log_format_escape=values.get("log-format-escaping", ""),
        stream_log_format=_log_format(values["stream-log-format"])
        if "stream-log-format" in values
        else DEFAULT_STREAM_LOG_FORMAT,
        stream_log_format_escape=values.get("stream-log-format-escaping", ""),
        access_log=_access_log(values),
        keepalive_timeout=values.get("keepalive-timeout", defaults.keepalive_timeout),
        server_tokens="on" if _on(values, "server-tokens") else "off",
        client_max_body_size=values.get("client-max-body-size", defaults.client_max_body_size),
        server_names_hash_bucket_size=values.get("server-names-hash-bucket-size", ""),
        server_names_hash_max_size=values.get("server-names-hash-max-size", ""),
        directives=tuple(
            (d, values[k] if k in values else _PLAIN_DEFAULTS[k])
            for k, d in _PLAIN_DIRECTIVES
            if k in values or k in _PLAIN_DEFAULTS
        ),
        proxy_buffering="" if buffering is None else ("on" if buffering == "true" else "off"),
        hide_headers=tuple(values["proxy-hide-headers"].split(","))
        if "proxy-hide-headers" in values
        else (),
        pass_headers=tuple(values["proxy-pass-headers"].split(","))
        if "proxy-pass-headers" in values
        else (),
        ssl_protocols=values.get("ssl-protocols", defaults.ssl_protocols),
        ssl_ciphers=values.get("ssl-ciphers", ""),
        ssl_prefer_server_ciphers=_on(values, "ssl-prefer-server-ciphers"),
        ssl_dhparam="ssl-dhparam-file" in values,
        http2=_on(values, "http2"),
        proxy_protocol=_on(values, "proxy-protocol"),
        real_ip_from=tuple(values["set-real-ip-from"].split(","))
        if "set-real-ip-from" in values
        else (),
        real_ip_header=values.get("real-ip-header", ""),
        real_ip_recursive=_on(values, "real-ip-recursive"),
        hsts=_hsts(values),
        hsts_behind_proxy=_on(values, "hsts-behind-proxy"),
        redirect_to_https=_on(values, "redirect-to-https"),
        redirect_code=values.get("http-redirect-code", "301"),
        add_headers=parse_add_headers(values["add-header"]) if "add-header" in values else (),
        default_server_return=b64(values["default-server-return"])
        if "default-server-return" in values
        else "",
    )


def data_of(obj: Mapping[str, Any] | None) -> Mapping[str, object]:
    """A raw ConfigMap's ``data`` ({} when absent or not a map)."""
    data = obj.get("data") if obj is not None else None
    return data if isinstance(data, Mapping) else {}


Event = tuple[str, str, str]  # (type, reason, message)


class ConfigMapState:
    """The keys in force for the one ConfigMap ``namespace/name``.

    ``update`` takes the object as it now is (None: deleted, so every key goes
    back to its default); ``route_defaults`` and ``tuning`` say what is in
    force; ``reloaded`` says how applying it went, and gives the Event."""

    def __init__(
        self,
        namespace: str,
        name: str,
        render: Callable[[Tuning], Mapping[str, str]],
        ingress_nginx: tuple[str, str] | None = None,
    ) -> None:
        """``render``: the configuration files (path -> text) for given settings;
        ``namespace``/``name`` "" without --nginx-configmaps; ``ingress_nginx``:
        --ingress-nginx-configmap, whose keys NIC's override."""
        self.namespace = namespace
        self.name = name
        self.ingress_nginx = ingress_nginx
        self._render = render
        self._values: dict[str, str] = {}
        self._applied: dict[str, str] = {}
        self._problems = False
        self._nic_data: Mapping[str, object] = {}
        self._inn_data: dict[str, str] = {}
        self._said: set[str] = set()  # ingress-nginx notes already said
        self._notes: list[str] = []  # and those to say
        self.last = (namespace, name)  # the ConfigMap updated last: its Events

    @property
    def who(self) -> str:
        return "/".join(self.last)

    def watches(self, namespace: str, name: str) -> bool:
        return (namespace, name) in ((self.namespace, self.name), self.ingress_nginx)

    def update(
        self, obj: Mapping[str, Any] | None, source: tuple[str, str] | None = None
    ) -> list[Event]:
        """Take the ConfigMap's new data (``source``: which ConfigMap, NIC's
        when None); returns a Warning per bad key (NIC's ``InvalidValue``) —
        each such key keeps its last good value (``ingress_nginx_notes``: what
        ingress-nginx's ConfigMap is told)."""
        from_inn = source is not None and source == self.ingress_nginx
        self.last = source if source is not None else (self.namespace, self.name)
        if from_inn:
            raw = data_of(obj)
            self._inn_data = {
                k: v for k, v in raw.items() if isinstance(k, str) and isinstance(v, str)
            }
        else:
            self._nic_data = data_of(obj)
        data, notes = merged(self._nic_data, self._inn_data if self.ingress_nginx else None)
        if from_inn:
            self._said = set()  # its keys changed: say again what is not applied
        self._notes = [n for n in notes if n not in self._said]
        self._said.update(notes)
        return self._parsed(parse_data(data))

    def ingress_nginx_notes(self) -> list[Event]:
        """The Warning for ingress-nginx's ConfigMap, if it has news: its keys not
        applied (and those NIC's ConfigMap overrides, whichever was read first),
        in one Event."""
        if self.ingress_nginx is None:
            return []
        who = "/".join(self.ingress_nginx)
        notes, self._notes = self._notes, []
        if not notes:
            return []
        return [("Warning", NOT_APPLIED, f"ConfigMap {who}: not applied: {'; '.join(notes)}")]

    def _parsed(self, parsed: Parsed) -> list[Event]:
        values = dict(parsed.values)
        for key in parsed.problems:
            if key in self._values:
                values[key] = self._values[key]
            else:
                values.pop(key, None)
        for group in GROUPS:
            if any(k in parsed.problems for k in group):
                for key in group:
                    if key in self._values:
                        values[key] = self._values[key]
                    else:
                        values.pop(key, None)
        self._values = values
        self._problems = bool(parsed.problems)
        return [
            ("Warning", INVALID_VALUE, f"ConfigMap {self.who} '{key}' {why}")
            for key, why in sorted(parsed.problems.items())
        ]

    @property
    def values(self) -> Mapping[str, str]:
        """Every key in force (normalised), global and route-level."""
        return dict(self._values)

    def route_defaults(self) -> Mapping[str, str]:
        """The route-level keys in force, by NIC's key names, normalised
        (``true``/``false``, NIC's time form, trimmed sizes): the defaults that
        ``nginx.org/*`` annotations override for each Ingress and VirtualServer,
        and the global keys routes read (``_ROUTES_READ``)."""
        return {k: v for k, v in self._values.items() if k in ROUTE_KEYS or k in _ROUTES_READ}

    def global_values(self) -> Mapping[str, str]:
        return {k: v for k, v in self._values.items() if k in GLOBAL_KEYS}

    def tuning(self) -> Tuning:
        return tuning(self._values)

    def status_addresses(self) -> tuple[str, ...] | None:
        """``external-status-address``: the addresses status reports instead of
        ``--external-service``'s or ``--ingress-address``'s (None: unset)."""
        value = self._values.get("external-status-address")
        return None if value is None else tuple(value.split(","))

    def files(self) -> dict[str, str]:
        """The configuration files for the values in force (the DH parameters'
        file too, when ssl-dhparam-file is set; left in place when unset)."""
        files = dict(self._render(self.tuning()))
        if (dhparam := self._values.get("ssl-dhparam-file")) is not None:
            files[DHPARAM_FILE] = dhparam
        return files

    def waiting(self, error: str) -> Event:
        """The Event for an update whose reload failed and is tried again (it
        may yet apply: its values stay)."""
        return (
            "Warning",
            UPDATED_WITH_ERROR,
            f"ConfigMap {self.who} was updated, but not applied yet: {error}; "
            "the reload is retried",
        )

    def reloaded(self, error: str | None) -> Event:
        """The Event for the update just applied: ``error`` is why NGINX refused
        it (the values then go back to those it runs with)."""
        if error is not None:
            self._values = dict(self._applied)
            return (
                "Warning",
                UPDATED_WITH_ERROR,
                f"ConfigMap {self.who} was updated, but not applied: {error}",
            )
        self._applied = dict(self._values)
        if self._problems:
            return (
                "Warning",
                UPDATED_WITH_ERROR,
                f"ConfigMap {self.who} updated with errors. Ignoring invalid values",
            )
        return ("Normal", UPDATED, f"ConfigMap {self.who} updated without error")
