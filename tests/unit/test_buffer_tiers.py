"""Per-route proxy buffers (configs/buffer_tiers.py): the tier a route asks
for, the flags in its V record (Ingress annotations, VirtualServer upstream
fields), the warning above the largest tier, and the tiers' locations in
nginx.conf."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferryman.configs.buffer_tiers import (
    BUFFERS,
    BUSY,
    MIXED_BUFFERING,
    TIERS_KIB,
    BufferAsk,
    TooLarge,
    parse_buffers,
    route_flags,
    tier_kib,
)
from ferryman.configs.render import Renderer
from ferryman.kinds.ingress.parse.annotations import validate
from ferryman.kinds.ingress.parse.ingress import parse_ingress
from ferryman.kinds.ingress.records.hosts import ingress_records
from ferryman.kinds.ingress.records.options import ingress_options
from ferryman.kinds.ingress.records.virtual_hosts import virtual_hosts
from ferryman.kinds.virtualserver.parse.virtualserver import parse_virtual_server
from ferryman.kinds.virtualserver.records.virtualserver import VSRecords, vs_records
from testkit.render import MAIN
from testkit.vs_fast import locations

KIB = 1024
_sizes = st.integers(min_value=1, max_value=512 * KIB)
_asks = st.builds(
    BufferAsk,
    buffer_size=st.none() | _sizes,
    buffers=st.none() | st.tuples(st.integers(1, 64), _sizes),
    busy_buffers_size=st.none() | _sizes,
)


def _gives(kib: int, ask: BufferAsk) -> bool:
    """Whether tier ``kib`` gives at least every value ``ask`` asks for."""
    size = kib * KIB
    ok = ask.buffer_size is None or size >= ask.buffer_size
    if ask.buffers is not None:
        number, one = ask.buffers
        ok = ok and size >= one and BUFFERS * size >= number * one
    if ask.busy_buffers_size is not None:
        ok = ok and BUSY * size >= ask.busy_buffers_size
    return ok


@given(_asks)
def test_the_tier_is_the_smallest_that_gives_at_least_the_ask(ask: BufferAsk) -> None:
    fitting = [kib for kib in TIERS_KIB if _gives(kib, ask)]
    if not ask.asked():
        assert tier_kib(ask) is None
    elif not fitting:
        with pytest.raises(TooLarge, match=r"largest buffer tier \(proxy_buffer_size 256k"):
            tier_kib(ask)
    else:
        assert tier_kib(ask) == fitting[0]  # the smallest; every larger one gives it too
        assert all(_gives(kib, ask) for kib in TIERS_KIB if kib >= fitting[0])


@given(st.sampled_from(TIERS_KIB))
def test_every_tier_is_valid_for_nginx(kib: int) -> None:
    """busy >= max(buffer size, one buffer), busy < all buffers minus one
    (NGINX refuses the configuration otherwise)."""
    assert BUSY * kib >= kib and BUSY * kib < (BUFFERS - 1) * kib


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("4 16k", (4, 16 * KIB)),
        ("8 4K", (8, 4 * KIB)),
        ("2 1m", (2, KIB * KIB)),
        ("8 512", (8, 512)),
    ],
)
def test_parse_buffers(value: str, parsed: tuple[int, int]) -> None:
    assert parse_buffers(value) == parsed


@pytest.mark.parametrize(
    ("annotations", "tier"),
    [
        ({}, None),
        ({"nginx.org/proxy-buffer-size": "16k"}, 16),
        ({"nginx.org/proxy-buffer-size": "17k"}, 32),
        ({"nginx.org/proxy-buffers": "4 256k"}, 256),
        ({"nginx.org/proxy-buffers": "32 4k"}, 16),  # 128k in all: 8 x 16k
        ({"nginx.org/proxy-busy-buffers-size": "64k"}, 32),
        ({"nginx.org/proxy-buffer-size": "4k", "nginx.org/proxy-buffers": "8 8k"}, 8),
    ],
)
def test_annotations_choose_a_tier(annotations: dict[str, str], tier: int | None) -> None:
    options, warnings = ingress_options(annotations, {})
    assert options.buffer_tier == tier and warnings == []
    assert options.slow() is (tier is not None)


def test_above_the_largest_tier_is_a_warning_naming_it() -> None:
    annotations = {"nginx.org/proxy-buffer-size": "512k", "nginx.org/proxy-buffers": "4 8k"}
    options, warnings = ingress_options(annotations, {"proxy-buffer-size": "16k"})
    assert options.buffer_tier is None
    assert warnings == [
        "nginx.org/proxy-buffer-size, nginx.org/proxy-buffers: above ferryman's largest "
        "buffer tier (proxy_buffer_size 256k, proxy_buffers 8 256k, proxy_busy_buffers_size "
        "512k); the server's buffers apply"
    ]


def test_the_configmaps_keys_are_not_a_tier() -> None:
    """They are nginx.conf's http-level values (configs/configmap.py), which
    every route without an annotation uses."""
    options, _ = ingress_options({}, {"proxy-buffer-size": "16k", "proxy-buffers": "8 16k"})
    assert options.buffer_tier is None and not options.slow()


def _ingress_flags(annotations: dict[str, str]) -> list[str]:
    ing = parse_ingress(
        {
            "metadata": {"name": "a", "namespace": "default", "annotations": annotations},
            "spec": {
                "rules": [
                    {
                        "host": "b.test",
                        "http": {
                            "paths": [
                                {
                                    "path": "/",
                                    "pathType": "Prefix",
                                    "backend": {"service": {"name": "s", "port": {"number": 80}}},
                                }
                            ]
                        },
                    }
                ]
            },
        }
    )
    vhosts, _ = virtual_hosts(ing, ["b.test"], {})
    out = ingress_records(ing, vhosts, None, "ferryman", {})  # type: ignore[arg-type]
    (written,) = out.written
    assert written.routing is not None
    routes = [i.split("|") for i in written.routing.split(" ") if i.startswith("R|")]
    return [r[8] if len(r) > 8 else "" for r in routes]


def test_ingress_routes_carry_the_tier_flag() -> None:
    assert _ingress_flags({"nginx.org/proxy-buffer-size": "16k"}) == ["b16"]
    both = {"nginx.org/proxy-buffer-size": "64k", "nginx.org/proxy-buffering": "false"}
    assert _ingress_flags(both) == ["ub64"]
    assert _ingress_flags({"nginx.org/proxy-buffering": "false"}) == ["u"]


def _vs(upstreams: list[dict[str, Any]], routes: list[dict[str, Any]]) -> VSRecords:
    parsed = parse_virtual_server(
        {
            "apiVersion": "k8s.nginx.org/v1",
            "kind": "VirtualServer",
            "metadata": {"name": "v", "namespace": "ns"},
            "spec": {"host": "v.test", "upstreams": upstreams, "routes": routes},
        }
    )
    assert parsed.resource is not None, parsed.problems
    return vs_records(parsed.resource, None)


def _flags(records: VSRecords) -> list[str]:
    routes = [i.split("|") for i in records.record.split(" ") if i.startswith("R|")]
    return [r[8] if len(r) > 8 else "" for r in routes]


def test_virtualserver_routes_take_the_largest_tier_of_their_upstreams() -> None:
    upstreams = [
        {"name": "small", "service": "s", "port": 80, "buffer-size": "8k"},
        {"name": "big", "service": "b", "port": 80, "buffers": {"number": 8, "size": "32k"}},
        {"name": "off", "service": "o", "port": 80, "buffering": False},
        {"name": "plain", "service": "p", "port": 80},
    ]
    split = [{"weight": 50, "action": {"pass": "small"}}, {"weight": 50, "action": {"pass": "big"}}]
    routes = [
        {"path": "/small", "action": {"pass": "small"}},
        {"path": "/split", "splits": split},
        {"path": "/off", "action": {"pass": "off"}},
        {"path": "/plain", "action": {"pass": "plain"}},
        {
            "path": "/mixed",
            "matches": [{"conditions": [{"header": "x", "value": "1"}], "action": {"pass": "off"}}],
            "action": {"pass": "plain"},
        },
    ]
    records = _vs(upstreams, routes)
    assert _flags(records) == ["b8", "b32", "u", "", ""]
    assert records.warnings == (f"spec.routes[4]: {MIXED_BUFFERING}",)
    # Buffered differently: the C module (the server's buffers) hands them on.
    assert locations(records.fast) == ["s", "s", "s", "f", "s"]


def test_virtualserver_buffers_above_the_largest_tier_warn() -> None:
    upstreams = [{"name": "u", "service": "s", "port": 80, "buffer-size": "1m"}]
    records = _vs(upstreams, [{"path": "/", "action": {"pass": "u"}}])
    assert _flags(records) == [""]
    assert records.warnings == (
        "spec.upstreams[0].buffer-size: above ferryman's largest buffer tier (proxy_buffer_size "
        "256k, proxy_buffers 8 256k, proxy_busy_buffers_size 512k); the server's buffers apply",
    )


def test_mixed_buffering_is_buffered_with_a_warning() -> None:
    assert route_flags([(None, True), (8, False)]) == ("b8", MIXED_BUFFERING)
    assert route_flags([(16, True), (64, True)]) == ("ub64", None)
    assert route_flags([]) == ("", None)


def test_the_locations_of_every_tier_are_in_nginx_conf() -> None:
    text = Renderer().main(MAIN)
    for kib in TIERS_KIB:
        for name in (f"b{kib}", f"unbuffered_b{kib}"):
            body = text.split(f"location @ferryman_{name} {{", 1)[1].split("\n        }\n", 1)[0]
            assert f"proxy_buffer_size {kib}k;" in body
            assert f"proxy_buffers {BUFFERS} {kib}k;" in body
            assert f"proxy_busy_buffers_size {BUSY * kib}k;" in body
            assert f'set $ferryman_variant "{name}";' in body
            assert ("proxy_buffering off;" in body) is name.startswith("unbuffered")


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        (
            {"nginx.org/proxy-buffers": "not_a_proxy_buffers_spec"},
            'annotations.nginx.org/proxy-buffers: Invalid value: "not_a_proxy_buffers_spec": '
            "must be a proxy buffer spec",
        ),
        (
            {"nginx.org/proxy-buffer-size": "not_a_size"},
            'annotations.nginx.org/proxy-buffer-size: Invalid value: "not_a_size": must consist '
            "of numeric characters followed by a valid size suffix. 'k|K|m|M (e.g. '16',  or "
            "'32k',  or '64M', regex used for validation is '\\d+[kKmM]?')",
        ),
    ],
)
def test_invalid_values_are_nics_messages(annotations: dict[str, str], message: str) -> None:
    """NIC's validation (internal/k8s/validation.go's annotation tests)."""
    _, problems, _ = validate(annotations, frozenset({"s"}), hostless=False)
    assert [str(p) for p in problems] == [message]
