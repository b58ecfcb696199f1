"""ingress-nginx's ConfigMap (``--ingress-nginx-configmap``) as NIC's keys.

A migrating cluster still has ingress-nginx's ConfigMap, tuned over years.
Its keys that say what one of NIC's keys says are read as that key (seconds
without a unit gain one, ``use-forwarded-headers`` becomes NGINX's real-ip
settings as ingress-nginx wrote them), so one parser and one renderer serve
both (``configs/configmap.py``). A key NIC's ConfigMap (``--nginx-configmaps``)
also sets is NIC's: ferryman's own vocabulary wins, and the Warning says so.
A key with no equivalent yet, or one ingress-nginx does not know, is named in
a Warning; snippets are never applied (``kinds/ingress/parse/ingress_nginx.py``
says why).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

SNIPPETS = frozenset(
    {
        "http-snippet",
        "main-snippet",
        "server-snippet",
        "location-snippet",
        "stream-snippet",
        "modsecurity-snippet",
    }
)


@dataclass
class Translated:
    data: dict[str, str] = field(default_factory=dict)  # NIC's keys
    warnings: list[str] = field(default_factory=list)


class _Unusable(ValueError):
    pass


_SECONDS = re.compile(r"[0-9]{1,9}")


def _seconds(value: str) -> str:
    if not _SECONDS.fullmatch(value.strip()):
        raise _Unusable("must be a whole number of seconds")
    return f"{int(value)}s"


def _same(value: str) -> str:
    return value.strip()


# ingress-nginx's variables in log-format-upstream that ferryman's NGINX has
# under another name, or not at all ("-" in the log).
_LOG_VARIABLES = {
    "req_id": "$request_id",
    "proxy_upstream_name": "-",
    "proxy_alternative_upstream_name": "-",
    "namespace": "-",
    "ingress_name": "-",
    "service_name": "-",
    "service_port": "-",
}
_VARIABLE = re.compile(r"\$\{?([a-z_]+)\}?")


def _log_format(value: str, warnings: list[str]) -> str:
    gone: set[str] = set()

    def one(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in _LOG_VARIABLES:
            return m.group(0)
        if _LOG_VARIABLES[name] == "-":
            gone.add(name)
        return _LOG_VARIABLES[name]

    out = _VARIABLE.sub(one, value)
    if gone:
        names = ", ".join(f"${n}" for n in sorted(gone))
        warnings.append(f"log-format-upstream: {names} logged as - (ferryman has no such variable)")
    return out


# ingress-nginx key -> (NIC key, value conversion).
KEYS: dict[str, tuple[str, Callable[[str], str]]] = {
    "proxy-body-size": ("client-max-body-size", _same),
    "proxy-connect-timeout": ("proxy-connect-timeout", _seconds),
    "proxy-read-timeout": ("proxy-read-timeout", _seconds),
    "proxy-send-timeout": ("proxy-send-timeout", _seconds),
    "proxy-buffer-size": ("proxy-buffer-size", _same),
    "proxy-max-temp-file-size": ("proxy-max-temp-file-size", _same),
    "proxy-busy-buffers-size": ("proxy-busy-buffers-size", _same),
    "ssl-protocols": ("ssl-protocols", _same),
    "ssl-ciphers": ("ssl-ciphers", _same),
    "hsts": ("hsts", _same),
    "hsts-max-age": ("hsts-max-age", _same),
    "hsts-include-subdomains": ("hsts-include-subdomains", _same),
    "hsts-preload": ("hsts-preload", _same),
    "server-tokens": ("server-tokens", _same),
    "worker-processes": ("worker-processes", _same),
    "worker-shutdown-timeout": ("worker-shutdown-timeout", _same),
    "worker-cpu-affinity": ("worker-cpu-affinity", _same),
    "max-worker-connections": ("worker-connections", _same),
    "max-worker-open-files": ("worker-rlimit-nofile", _same),
    "error-log-level": ("error-log-level", _same),
    "keep-alive": ("keepalive-timeout", _seconds),
    "server-name-hash-bucket-size": ("server-names-hash-bucket-size", _same),
    "server-name-hash-max-size": ("server-names-hash-max-size", _same),
    "http-redirect-code": ("http-redirect-code", _same),
    "load-balance": ("lb-method", _same),
    "upstream-keepalive-connections": ("keepalive", _same),
}
# Read by ``_real_ip``; "compute-full-forwarded-for: true" is ferryman's default
# (NIC's $proxy_add_x_forwarded_for appends the client's address; the flag of
# that name, not a ConfigMap key, turns it off).
REAL_IP = frozenset(
    {
        "use-forwarded-headers",
        "enable-real-ip",
        "forwarded-for-header",
        "proxy-real-ip-cidr",
        "compute-full-forwarded-for",
    }
)
SERVED = frozenset(KEYS) | REAL_IP | {"log-format-upstream", "use-http2"}

# The rest of ingress-nginx's ConfigMap keys (v1.15.1): known, not applied yet.
KNOWN = (
    frozenset(
        [
            "access-log-params",
            "access-log-path",
            "add-headers",
            "allow-backend-server-header",
            "allow-cross-namespace-resources",
            "allow-snippet-annotations",
            "annotation-value-word-blocklist",
            "annotations-risk-level",
            "bind-address-ipv4",
            "bind-address-ipv6",
            "block-cidrs",
            "block-referers",
            "block-user-agents",
            "brotli-level",
            "brotli-min-length",
            "brotli-types",
            "client-body-buffer-size",
            "client-body-timeout",
            "client-header-buffer-size",
            "client-header-timeout",
            "custom-http-errors",
            "debug-connections",
            "default-type",
            "disable-access-log",
            "disable-http-access-log",
            "disable-ipv6",
            "disable-ipv6-dns",
            "disable-proxy-intercept-errors",
            "disable-stream-access-log",
            "enable-access-log-for-default-backend",
            "enable-aio-write",
            "enable-auth-access-log",
            "enable-brotli",
            "enable-modsecurity",
            "enable-multi-accept",
            "enable-ocsp",
            "enable-opentelemetry",
            "enable-owasp-modsecurity-crs",
            "enable-serial-reloads",
            "enable-syslog",
            "enable-underscores-in-headers",
            "error-log-path",
            "force-ssl-redirect",
            "forwarded-for-proxy-protocol-header",
            "forwarded-host-header",
            "generate-request-id",
            "geoip2-autoreload-in-minutes",
            "global-allowed-response-headers",
            "global-external-auth",
            "grpc-buffer-size-kb",
            "gzip-disable",
            "gzip-level",
            "gzip-min-length",
            "gzip-types",
            "hide-headers",
            "http-access-log-path",
            "http2-max-concurrent-streams",
            "http2-max-field-size",
            "http2-max-header-size",
            "http2-max-requests",
            "ignore-invalid-headers",
            "keep-alive-requests",
            "large-client-header-buffers",
            "limit-conn-status-code",
            "limit-conn-zone-variable",
            "limit-rate",
            "limit-rate-after",
            "limit-req-status-code",
            "log-format-escape-json",
            "log-format-escape-none",
            "log-format-stream",
            "lua-shared-dicts",
            "map-hash-bucket-size",
            "nginx-status-ipv4-whitelist",
            "nginx-status-ipv6-whitelist",
            "no-auth-locations",
            "no-tls-redirect-locations",
            "opentelemetry-config",
            "opentelemetry-operation-name",
            "opentelemetry-trust-incoming-span",
            "otel-max-export-batch-size",
            "otel-max-queuesize",
            "otel-sampler",
            "otel-sampler-parent-based",
            "otel-sampler-ratio",
            "otel-schedule-delay-millis",
            "otel-service-name",
            "otlp-collector-host",
            "otlp-collector-port",
            "preserve-trailing-slash",
            "proxy-add-original-uri-header",
            "proxy-buffering",
            "proxy-buffers-number",
            "proxy-cookie-domain",
            "proxy-cookie-path",
            "proxy-headers-hash-bucket-size",
            "proxy-headers-hash-max-size",
            "proxy-http-version",
            "proxy-protocol-header-timeout",
            "proxy-redirect-from",
            "proxy-redirect-to",
            "proxy-request-buffering",
            "proxy-set-headers",
            "proxy-ssl-location-only",
            "proxy-stream-next-upstream",
            "proxy-stream-next-upstream-timeout",
            "proxy-stream-next-upstream-tries",
            "proxy-stream-responses",
            "proxy-stream-timeout",
            "relative-redirects",
            "retry-non-idempotent",
            "reuse-port",
            "service-upstream",
            "skip-access-log-urls",
            "ssl-buffer-size",
            "ssl-dh-param",
            "ssl-early-data",
            "ssl-ecdh-curve",
            "ssl-redirect",
            "ssl-reject-handshake",
            "ssl-session-cache",
            "ssl-session-cache-size",
            "ssl-session-ticket-key",
            "ssl-session-tickets",
            "ssl-session-timeout",
            "stream-access-log-path",
            "strict-validate-path-type",
            "syslog-host",
            "syslog-port",
            "upstream-hash-by",
            "upstream-hash-by-subset",
            "upstream-hash-by-subset-size",
            "upstream-keepalive-requests",
            "upstream-keepalive-time",
            "upstream-keepalive-timeout",
            "use-geoip2",
            "use-gzip",
            "use-port-in-redirects",
            "use-proxy-protocol",
            "variables-hash-bucket-size",
            "variables-hash-max-size",
            "whitelist-source-range",
            "denylist-source-range",
            "proxy-next-upstream",
            "proxy-next-upstream-timeout",
            "proxy-next-upstream-tries",
        ]
    )
    - SERVED
)


def _true(data: Mapping[str, str], key: str) -> bool:
    return data.get(key, "").strip().lower() == "true"


def _real_ip(data: Mapping[str, str], out: Translated) -> None:
    """use-forwarded-headers / enable-real-ip as ingress-nginx writes them:
    real_ip_header <forwarded-for-header>, real_ip_recursive on, set_real_ip_from
    each of proxy-real-ip-cidr (its default: 0.0.0.0/0, every address)."""
    if not (_true(data, "use-forwarded-headers") or _true(data, "enable-real-ip")):
        return
    header = data.get("forwarded-for-header", "X-Forwarded-For").strip() or "X-Forwarded-For"
    cidrs = ",".join(
        c.strip() for c in data.get("proxy-real-ip-cidr", "0.0.0.0/0").split(",") if c.strip()
    )
    out.data["real-ip-header"] = header
    out.data["real-ip-recursive"] = "True"
    out.data["set-real-ip-from"] = cidrs or "0.0.0.0/0"


def translate(data: Mapping[str, str]) -> Translated:
    """ingress-nginx's ConfigMap ``data`` as NIC's keys, and what to say."""
    out = Translated()
    for key in sorted(data):
        value = data[key]
        if key in SNIPPETS:
            out.warnings.append(f"{key}: NGINX text from users is never applied (ferryman)")
        elif key in KEYS:
            target, convert = KEYS[key]
            try:
                out.data[target] = convert(value)
            except _Unusable as e:
                out.warnings.append(f"{key}: {value!r} {e}: not applied")
        elif key == "log-format-upstream":
            out.data["log-format"] = _log_format(value, out.warnings)
        elif key == "use-http2":
            out.data["http2"] = value.strip()
        elif key == "compute-full-forwarded-for" and value.strip().lower() == "false":
            out.warnings.append(
                "compute-full-forwarded-for: false: ferryman appends the client's address to "
                "X-Forwarded-For unless run with --compute-full-forwarded-for=false"
            )
        elif key in KNOWN:
            out.warnings.append(f"{key}: not applied by ferryman yet")
        elif key not in REAL_IP:
            out.warnings.append(f"{key}: not an ingress-nginx ConfigMap key (misspelt?): ignored")
    if "hsts" in out.data and "hsts-preload" not in out.data:
        out.data["hsts-preload"] = "false"  # ingress-nginx's default; NIC's is preload
    _real_ip(data, out)
    return out


def merged(
    nic: Mapping[str, object], ingress_nginx: Mapping[str, str] | None
) -> tuple[dict[str, object], list[str]]:
    """NIC's keys over ingress-nginx's translated ones, and the warnings about
    the ingress-nginx ConfigMap (each key NIC's overrides among them)."""
    if ingress_nginx is None:
        return dict(nic), []
    t = translate(ingress_nginx)
    warnings = list(t.warnings)
    for key in sorted(t.data.keys() & nic.keys()):
        if t.data[key] != nic[key]:
            warnings.append(f"{key}: the NIC ConfigMap's value is used (--nginx-configmaps)")
    return {**t.data, **nic}, warnings
