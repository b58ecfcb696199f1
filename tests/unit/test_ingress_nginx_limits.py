"""ingress-nginx's limit-connections and limit-allowlist (limit-whitelist):
parse/ingress_nginx_limits.py and records/limit_conn.py."""

from __future__ import annotations

import base64
import ipaddress
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferryman.configs.buffer_tiers import slow_variants
from ferryman.configs.render import Renderer
from ferryman.kinds.ingress.parse.ingress import parse_ingress
from ferryman.kinds.ingress.parse.ingress_nginx import translate
from ferryman.kinds.ingress.parse.ingress_nginx_limits import (
    MAX_CONNECTIONS,
    ClientLimits,
    client_limits,
)
from ferryman.kinds.ingress.records.hosts import ingress_records
from ferryman.kinds.ingress.records.virtual_hosts import virtual_hosts
from ferryman.kinds.policy.records.rate import Limit
from ferryman.kinds.virtualserver.records.fast import _limit, _Unserved
from testkit.harness import ingress, path, rule
from testkit.render import MAIN

P = "nginx.ingress.kubernetes.io/"


def _limits(annotations: dict[str, str]) -> tuple[ClientLimits | None, list[str]]:
    warnings: list[str] = []
    return client_limits({P + k: v for k, v in annotations.items()}, warnings), warnings


def test_connections_and_an_allow_list() -> None:
    limits, warnings = _limits(
        {"limit-connections": "2", "limit-allowlist": "10.0.0.1/8, 192.168.1.7"}
    )
    assert limits == ClientLimits(2, ("10.0.0.0/8", "192.168.1.7/32"))
    assert warnings == []


def test_the_newer_name_wins_and_the_older_one_is_named() -> None:
    limits, warnings = _limits(
        {"limit-rps": "5", "limit-allowlist": "10.0.0.0/8", "limit-whitelist": "1.2.3.4"}
    )
    assert limits == ClientLimits(0, ("10.0.0.0/8",))
    assert warnings == [f"annotation {P}limit-whitelist is not applied: {P}limit-allowlist is set"]
    limits, _ = _limits({"limit-rpm": "5", "limit-whitelist": "::1"})
    assert limits == ClientLimits(0, ("::1/128",))


def test_an_unusable_value_is_not_applied_with_a_warning_naming_it() -> None:
    limits, warnings = _limits({"limit-rps": "5", "limit-allowlist": "10.0.0.0/8,nope"})
    assert limits is None
    assert warnings == [
        f"annotation {P}limit-allowlist: '10.0.0.0/8,nope': 'nope' is not an address or CIDR "
        "block: not applied (every client is limited)"
    ]
    for bad in ("-1", "1.5", "lots", "65536", ""):
        limits, warnings = _limits({"limit-connections": bad})
        assert limits is None
        assert warnings == [
            f"annotation {P}limit-connections: {bad!r} must be a whole number from 0 to 65535: "
            "not applied"
        ]


def test_an_allow_list_without_a_limit_says_so() -> None:
    limits, warnings = _limits({"limit-allowlist": "10.0.0.0/8"})
    assert limits is None
    assert warnings == [
        f"annotation {P}limit-allowlist is not applied: no limit-rps, limit-rpm or "
        "limit-connections to exempt from"
    ]
    assert _limits({"limit-connections": "0"}) == (None, [])


@given(st.text(max_size=12))
def test_any_connections_value_is_a_limit_in_range_or_a_warning(value: str) -> None:
    limits, warnings = _limits({"limit-connections": value})
    if warnings:
        assert limits is None and repr(value) in warnings[0]
    else:
        n = int(value.strip())
        assert 0 <= n <= MAX_CONNECTIONS
        assert (limits is None) == (n == 0)
        assert limits is None or limits.connections == n


_v4 = st.builds(
    lambda a, p: str(ipaddress.ip_network((a, p), strict=False)),
    st.integers(0, 2**32 - 1),
    st.integers(0, 32),
)
_v6 = st.builds(
    lambda a, p: str(ipaddress.ip_network((a, p), strict=False)),
    st.integers(0, 2**128 - 1),
    st.integers(0, 128),
)


@given(st.lists(st.one_of(_v4, _v6), min_size=1, max_size=6), st.sampled_from([",", ", ", " ,"]))
def test_any_list_of_networks_is_exempt_as_written(networks: list[str], sep: str) -> None:
    limits, warnings = _limits({"limit-rps": "1", "limit-allowlist": sep.join(networks)})
    assert warnings == []
    assert limits is not None
    assert limits.exempt == tuple(dict.fromkeys(networks))


def _ingress(annotations: dict[str, str]) -> Any:
    return parse_ingress(
        ingress("a", [rule("b.test", path("/", "s"))], annotations=annotations, namespace="shop")
    )


def _written(annotations: dict[str, str]) -> Any:
    ing = _ingress({P + k: v for k, v in annotations.items()})
    vhosts, _ = virtual_hosts(ing, ["b.test"], {})
    return ingress_records(ing, vhosts, None, "ferryman", {})  # type: ignore[arg-type]


def _items(routing: str, letter: str) -> list[list[str]]:
    return [i.split("|") for i in routing.split(" ") if i.startswith(f"P|{letter}|")]


def test_the_records_carry_the_connection_limit_and_the_exemption() -> None:
    out = _written({"limit-rps": "5", "limit-connections": "3", "limit-allowlist": "10.1.0.0/16"})
    (written,) = out.written
    assert out.warnings == []
    zone = base64.b64encode(b"ingress/shop/a").decode()
    (conn,) = _items(written.routing, "n")
    assert conn == ["P", "n", zone, "3", "503", "4.0a010000.16"]
    (rate,) = _items(written.routing, "r")
    assert rate[-1].endswith("." + base64.b64encode(b"4.0a010000.16").decode())
    # Routed by the Lua slow path, as limit-rps: no F record for the C module.
    assert written.fast is None


def test_without_an_allow_list_the_rate_limit_is_as_before() -> None:
    (plain,) = _written({"limit-rps": "5"}).written
    (rate,) = _items(plain.routing, "r")
    assert len(rate[-1].split(".")) == 8  # no ninth (exempt) field
    assert not _items(plain.routing, "n")
    (exempt,) = _written({"limit-rps": "5", "limit-allowlist": "10.0.0.0/8"}).written
    (rate,) = _items(exempt.routing, "r")
    assert rate[-1].split(".")[8:] == [base64.b64encode(b"4.0a000000.8").decode()]
    assert not _items(exempt.routing, "n")


def test_a_limit_with_an_exemption_is_never_the_c_modules() -> None:
    limit = Limit("z", 1000, "${binary_remote_addr}", 0, -1)
    assert _limit(limit)
    with pytest.raises(_Unserved):
        _limit(replace(limit, exempt=("10.0.0.0/8",)))


def test_proxy_version_buffering_and_connection_as_ingress_nginx_reads_them() -> None:
    t = translate(
        {
            P + "connection-proxy-header": "keep-alive",
            P + "proxy-http-version": "1.1",
            P + "proxy-request-buffering": "On",
        },
        {},
    )
    assert t.annotations["nginx.org/proxy-set-headers"] == "Connection: keep-alive"
    assert t.warnings == []
    assert not t.streamed
    t = translate(
        {
            P + "proxy-http-version": "1.0",
            P + "proxy-request-buffering": "off",
            P + "connection-proxy-header": 'a"b',
        },
        {},
    )
    assert t.streamed
    assert "nginx.org/proxy-set-headers" not in t.annotations
    assert t.warnings == [
        f"annotation {P}connection-proxy-header: 'a\"b' must be text without control characters, "
        '",", \'"\', "$" or "\\": not applied',
        f"annotation {P}proxy-http-version: '1.0' is not served: ferryman proxies HTTP/1.1 "
        "(ingress-nginx's default): not applied",
    ]
    t = translate({P + "proxy-http-version": "2", P + "proxy-request-buffering": "yes"}, {})
    assert not t.streamed
    assert t.warnings == [
        f'annotation {P}proxy-http-version: \'2\' must be "1.0" or "1.1": not applied',
        f'annotation {P}proxy-request-buffering: \'yes\' must be "on" or "off": not applied',
    ]


def test_request_buffering_off_is_the_streamed_slow_path() -> None:
    (written,) = _written({"proxy-request-buffering": "off"}).written
    (route,) = [i.split("|") for i in written.routing.split(" ") if i.startswith("R|")]
    assert route[8] == "s"
    assert written.fast is None
    (both,) = _written({"proxy-request-buffering": "off", "proxy-buffering": "off"}).written
    (route,) = [i.split("|") for i in both.routing.split(" ") if i.startswith("R|")]
    assert route[8] == "us"


def test_every_slow_location_has_a_streamed_twin() -> None:
    text = Renderer().main(MAIN)
    for variant, _ in slow_variants():
        name = f"@ferryman_{variant}" if variant else "@ferryman"
        body = text.split(f"location {name} {{", 1)[1].split("\n        }\n", 1)[0]
        streamed = variant.startswith("streamed")
        assert ("proxy_request_buffering off;" in body) is streamed
        assert ("proxy_buffering off;" in body) is ("unbuffered" in variant)
        if not streamed:
            twin = f"streamed_{variant}" if variant else "streamed"
            assert f"location @ferryman_{twin} {{" in text
