"""The --nginx-configmaps keys: NIC's parsing, the last good value kept, the text
NGINX gets (and that no value can add a directive to it)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ferryman.configs.configmap import IN_NGINX_CONF, ConfigMapState, Tuning, tuning
from ferryman.configs.render import Renderer
from ferryman.resources.configmap import (
    GLOBAL_KEYS,
    ROUTE_KEYS,
    UNSUPPORTED,
    parse_data,
    parse_default_server_return,
    parse_status_addresses,
)
from testkit.nginx_check import assert_nginx_t
from testkit.nginx_tokens import Directive, directives
from testkit.render import MAIN

# Every supported key, with a value NGINX takes.
FULL: dict[str, str] = {
    "worker-processes": "2",
    "worker-connections": "4096",
    "worker-rlimit-nofile": "65536",
    "worker-cpu-affinity": "auto",
    "worker-shutdown-timeout": "10s",
    "keepalive-timeout": "30s 20s",
    "keepalive-requests": "500",
    "error-log-level": "warn",
    "log-format": "$remote_addr - \"$request\" 'q' \\ {a;b}\n$status $body_bytes_sent",
    "log-format-escaping": "json",
    "stream-log-format": "$remote_addr \"q\" 's' {x;y}\n$status $session_time",
    "stream-log-format-escaping": "json",
    "access-log": "syslog:server=127.0.0.1:5514,tag=nginx main",
    "access-log-off": "false",
    "ssl-protocols": "TLSv1.2 TLSv1.3",
    "ssl-ciphers": "HIGH:!aNULL:!MD5",
    "ssl-prefer-server-ciphers": "true",
    "http2": "true",
    "proxy-protocol": "true",
    "set-real-ip-from": "10.0.0.0/8,192.168.0.1",
    "real-ip-header": "X-Forwarded-For",
    "real-ip-recursive": "true",
    "server-names-hash-bucket-size": "256",
    "server-names-hash-max-size": "2048",
    "map-hash-bucket-size": "256",
    "map-hash-max-size": "4096",
    "variables-hash-bucket-size": "256",
    "variables-hash-max-size": "2048",
    "client-body-buffer-size": "16k",
    "proxy-connect-timeout": "5s",
    "proxy-read-timeout": "1m 30",
    "proxy-send-timeout": "30",
    "client-max-body-size": "8m",
    "proxy-buffering": "False",
    "proxy-buffers": "8 8k",
    "proxy-buffer-size": "8k",
    "proxy-busy-buffers-size": "16k",
    "proxy-max-temp-file-size": "1024m",
    "proxy-hide-headers": "X-Powered-By, X-Runtime",
    "proxy-pass-headers": "Server",
    "server-tokens": "True",
    "hsts": "true",
    "hsts-max-age": "31536000",
    "hsts-include-subdomains": "true",
    "hsts-behind-proxy": "false",
    "hsts-preload": "false",
    "redirect-to-https": "true",
    "add-header": 'X-Frame-Options: DENY, X-Q: a \\"{b;c}\\" d: always',
    "ssl-redirect": "true",
    "http-redirect-code": "308",
    "default-server-return": "418 short and stout $host; }",
    "lb-method": "least_conn",
    "max-fails": "3",
    "fail-timeout": "20s",
    "keepalive": "32",
}


# One, as ferryman has: each Renderer compiles the templates again (half of
# a render's time, and this file renders hundreds of times).
_RENDERER = Renderer()


def _main(values: Mapping[str, str]) -> str:
    return _RENDERER.main(dataclasses.replace(MAIN, tuning=tuning(values)))


def test_full_covers_every_supported_key() -> None:
    assert set(FULL) == (set(GLOBAL_KEYS) | set(ROUTE_KEYS)) - {"ssl-dhparam-file"}


def test_values_are_normalised_as_nic_reads_them() -> None:
    parsed = parse_data(FULL)
    assert parsed.problems == {}
    v = parsed.values
    assert v["proxy-read-timeout"] == "1m30s"  # NIC's ParseTime
    assert v["proxy-send-timeout"] == "30s"
    assert v["proxy-buffering"] == "false"  # Go's ParseBool: "False"
    assert v["server-tokens"] == "true"
    assert v["proxy-hide-headers"] == "X-Powered-By,X-Runtime"
    assert v["set-real-ip-from"] == "10.0.0.0/8,192.168.0.1/32"


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("http2", "yes", "contains invalid bool"),
        ("worker-processes", "many", "contains invalid integer"),
        ("worker-connections", "1024;", "contains invalid integer"),
        ("proxy-read-timeout", "60s; include /etc/passwd", "invalid time string"),
        ("client-max-body-size", "1m}", "invalid size string"),
        ("ssl-protocols", "TLSv1.3; x", "invalid protocol"),
        ("ssl-ciphers", 'HIGH"; x "', "OpenSSL cipher list"),
        ("set-real-ip-from", "10.0.0.0/8; deny all", "invalid address"),
        ("real-ip-header", "X-Real-IP;", "invalid header name"),
        ("proxy-hide-headers", "A B", "invalid header name"),
        ("access-log", "/var/log/access.log", "invalid value for 'access-log'"),
        ("error-log-level", "loud", "must be one of"),
        ("lb-method", "fastest", "Invalid value for the lb-method key"),
        ("log-format", "a\x00b", "control characters"),
        ("main-snippets", "worker_priority 0;", "snippets are off"),
    ],
)
def test_a_bad_value_is_named_with_its_reason(key: str, value: str, reason: str) -> None:
    parsed = parse_data({key: value})
    assert key not in parsed.values
    assert reason in parsed.problems[key]


def _state() -> ConfigMapState:
    return ConfigMapState("nginx-ingress", "nginx-config", lambda t: {"nginx.conf": _fake(t)})


def _fake(t: Tuning) -> str:
    return f"{t.worker_connections} {t.http2} {t.hsts}"


def _cm(data: Mapping[str, object]) -> dict[str, object]:
    return {"kind": "ConfigMap", "metadata": {"namespace": "nginx-ingress"}, "data": dict(data)}


def test_a_bad_key_keeps_its_last_good_value_and_the_others_apply() -> None:
    state = _state()
    assert state.update(_cm({"worker-connections": "2048", "http2": "true"})) == []
    assert state.reloaded(None) == (
        "Normal",
        "Updated",
        "ConfigMap nginx-ingress/nginx-config updated without error",
    )
    events = state.update(_cm({"worker-connections": "lots", "http2": "false"}))
    assert events == [
        (
            "Warning",
            "InvalidValue",
            "ConfigMap nginx-ingress/nginx-config 'worker-connections' contains invalid "
            'integer: strconv.Atoi: parsing "lots": invalid syntax, ignoring',
        )
    ]
    assert state.tuning().worker_connections == "2048"  # kept
    assert state.tuning().http2 is False  # applied
    assert state.reloaded(None)[1] == "UpdatedWithError"
    # A bad key never set before falls back to ferryman's default.
    fresh = _state()
    fresh.update(_cm({"worker-connections": "lots"}))
    assert fresh.tuning().worker_connections == Tuning().worker_connections


def test_deleting_the_configmap_brings_every_default_back() -> None:
    state = _state()
    state.update(_cm({"worker-connections": "2048"}))
    state.reloaded(None)
    state.update(None)
    assert state.tuning() == Tuning()


def test_one_bad_hsts_option_keeps_every_hsts_key_as_it_was() -> None:
    state = _state()
    state.update(_cm({"hsts": "true", "hsts-max-age": "100"}))
    events = state.update(_cm({"hsts": "true", "hsts-max-age": "x", "hsts-behind-proxy": "true"}))
    assert {e[2].split("'")[1] for e in events} == {"hsts", "hsts-max-age"}
    assert state.tuning().hsts == "max-age=100; preload"
    assert state.tuning().hsts_behind_proxy is False


def test_a_refused_update_goes_back_to_what_nginx_runs() -> None:
    state = _state()
    state.update(_cm({"worker-connections": "2048"}))
    state.reloaded(None)
    state.update(_cm({"worker-connections": "4096"}))
    event = state.reloaded("nginx: [emerg] no good")
    assert event == (
        "Warning",
        "UpdatedWithError",
        "ConfigMap nginx-ingress/nginx-config was updated, but not applied: nginx: [emerg] no good",
    )
    assert state.files() == {"nginx.conf": "2048 False "}


def test_route_defaults_are_the_route_keys_normalised() -> None:
    state = _state()
    state.update(_cm({"proxy-read-timeout": "90", "worker-processes": "2", "hsts": "TRUE"}))
    assert state.route_defaults() == {"proxy-read-timeout": "90s", "hsts": "true"}


def test_without_a_configmap_nginx_conf_is_unchanged() -> None:
    assert _main({}) == Renderer().main(MAIN)


def test_every_key_reaches_nginx_conf() -> None:
    text = _main(parse_data(FULL).values)
    found = {(d.name, d.args) for d in directives(text)}
    for expected in [
        ("worker_processes", ("2",)),
        ("worker_connections", ("4096",)),
        ("worker_rlimit_nofile", ("65536",)),
        ("error_log", ("stderr", "warn")),
        ("keepalive_timeout", ("30s", "20s")),
        ("proxy_read_timeout", ("1m30s",)),
        ("client_max_body_size", ("8m",)),
        ("proxy_buffering", ("off",)),
        ("server_tokens", ("on",)),
        ("ssl_protocols", ("TLSv1.2", "TLSv1.3")),
        ("ssl_ciphers", ("HIGH:!aNULL:!MD5",)),
        ("set_real_ip_from", ("192.168.0.1/32",)),
        ("real_ip_header", ("X-Forwarded-For",)),
        ("real_ip_recursive", ("on",)),
        ("listen", ("443", "ssl", "http2", "default_server", "reuseport", "proxy_protocol")),
        ("access_log", ("syslog:server=127.0.0.1:5514,tag=nginx", "main")),
        ("return", ("308", "https://$host$request_uri")),
        (
            "log_format",
            (
                "main",
                "escape=json",
                "$remote_addr - \"$request\" 'q' \\ {a;b}",
                " $status $body_bytes_sent",
            ),
        ),
    ]:
        assert expected in found, expected


def test_the_full_configuration_passes_nginx_t(tmp_path: Path) -> None:
    assert_nginx_t(tmp_path, _main(parse_data(FULL).values))


# ---- no value can add a directive ------------------------------------------------

# FULL, and FULL with hsts-behind-proxy (its map's entry is "https", not "on").
_BASELINE = directives(_main(parse_data(FULL).values)) + directives(
    _main({**parse_data(FULL).values, "hsts-behind-proxy": "true"})
)
_SHAPES = {(d.path, d.name) for d in _BASELINE}
_MAX_ARGS: dict[str, int] = {}
for _d in _BASELINE:
    _MAX_ARGS[_d.name] = max(_MAX_ARGS.get(_d.name, 0), len(_d.args))

# Text built from what NGINX's reader gives meaning to.
_hostile = st.lists(
    st.sampled_from([*"ab1 ;{}'\"\\$#\n\t\r,:/=.-_", "include /x", "TLSv1.3", "10s", "on"]),
    max_size=20,
).map("".join)
_keys = st.sampled_from(sorted({*GLOBAL_KEYS, *ROUTE_KEYS, *UNSUPPORTED}))


def _check_no_new_directive(found: list[Directive]) -> None:
    for d in found:
        assert (d.path, d.name) in _SHAPES, d
        if d.name not in ("log_format", "map"):
            assert len(d.args) <= _MAX_ARGS[d.name], d


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_keys, st.one_of(_hostile, st.sampled_from(list(FULL.values())))))
def test_no_value_adds_a_directive_or_block(data: dict[str, str]) -> None:
    state = _state()
    state.update(_cm(data))
    found = directives(_main(state.values))
    _check_no_new_directive(found)
    # log_format keeps one name and one escape= at most: every other argument is
    # one quoted line of the format, read back as written.
    for d in found:
        if d.name == "log_format" and d.args[0] == "main" and "log-format" in state.values:
            lines = [a for a in d.args[1:] if not a.startswith("escape=")]
            written = [ln for ln in state.values["log-format"].split("\n") if ln]
            assert lines == [(" " if i else "") + ln for i, ln in enumerate(written)]


@pytest.mark.parametrize("value", ["٣s", "1m\n30s", "1m;", "", " ", "1x", "1s 2s"])
def test_times_are_nic_times_in_ascii(value: str) -> None:
    assert "proxy-read-timeout" in parse_data({"proxy-read-timeout": value}).problems


@given(st.text(max_size=30))
def test_a_time_either_fails_or_is_an_nginx_time(value: str) -> None:
    parsed = parse_data({"proxy-read-timeout": value})
    if "proxy-read-timeout" in parsed.values:
        assert re.fullmatch(r"([0-9]+(y|M|w|d|h|m|s|ms))+", parsed.values["proxy-read-timeout"])


@pytest.mark.parametrize("key", sorted(IN_NGINX_CONF))
def test_route_keys_said_to_be_in_nginx_conf_are(key: str) -> None:
    values = {**parse_data(FULL).values, "hsts-behind-proxy": "true"}  # FULL's is the default
    without = {k: v for k, v in values.items() if k != key}
    if key.startswith("hsts-"):
        without["hsts"] = values["hsts"]
    assert key in ROUTE_KEYS
    assert _main(values) != _main(without)


def test_the_connect_timeout_is_ferrymans_unless_the_configmap_sets_one() -> None:
    """NGINX's 60s would hold a request on a vanished pod's address (issue 32)."""
    default = {(d.name, d.args) for d in directives(_main({}))}
    assert ("proxy_connect_timeout", ("2s",)) in default
    state = _state()
    state.update(_cm({"proxy-connect-timeout": "30s"}))
    found = [d.args for d in directives(_main(state.values)) if d.name == "proxy_connect_timeout"]
    assert found == [("30s",)]


@pytest.mark.parametrize(
    ("value", "normalised"),
    [
        ("404", "404"),
        (" 302  https://nginx.org/x?a=b ", "302 https://nginx.org/x?a=b"),
        ("https://example.com", "302 https://example.com"),
        ("301 /elsewhere", "301 /elsewhere"),
        ("200 ok; $host {x}", "200 ok; $host {x}"),
        ("444", "444"),
        ("503", "503"),
    ],
)
def test_default_server_return_values(value: str, normalised: str) -> None:
    assert parse_default_server_return(value) == (normalised, None)


@pytest.mark.parametrize(
    "value",
    ["", "999", "99 x", "abc", "302 not a url", "301 https://a b", "200 a\nb", "444 x", "٣٠٢"],
)
def test_default_server_return_refusals(value: str) -> None:
    normalised, why = parse_default_server_return(value)
    assert normalised is None and why is not None and "default-server-return" in why


def test_external_status_address_values() -> None:
    assert parse_status_addresses(" 192.0.2.1, lb.example.com ,2001:db8::1") == (
        "192.0.2.1,lb.example.com,2001:db8::1",
        None,
    )
    for bad in ("", " , ", "lb.example.com;x", "Not_A_Host", "192.0.2.1 a"):
        value, why = parse_status_addresses(bad)
        assert value is None and why
