"""The F record (kinds/virtualserver/records/fast.py): which routes ngx_http_ferryman_module is
given to serve, which stay with the Lua slow path, and that every value travels
as base64 so none can be read as the record's structure."""

from __future__ import annotations

import base64
import dataclasses
import re
from typing import Any

from hypothesis import assume, given
from hypothesis import strategies as st

from ferryman.configs.served_fields import defaults_except
from ferryman.kinds.virtualserver.parse.virtualserver import VirtualServer, parse_virtual_server
from ferryman.kinds.virtualserver.records.virtualserver import vs_records
from ferryman.resources.nic_upstream import Upstream
from ferryman.wire.push import record_problem
from testkit.vs_fast import locations


def vs(routes: list[dict[str, Any]], **spec: Any) -> VirtualServer:
    parsed = parse(routes, **spec)
    assert parsed is not None
    return parsed


def parse(routes: list[dict[str, Any]], **spec: Any) -> VirtualServer | None:
    """The VirtualServer, None when NIC's rules refuse it."""
    obj = {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": {"name": "v", "namespace": "ns"},
        "spec": {
            "host": "v.example.com",
            "upstreams": [
                {"name": "a", "service": "a", "port": 80},
                {"name": "r", "service": "r", "port": 80, "lb-method": "random"},
            ],
            "routes": routes,
            **spec,
        },
    }
    parsed = parse_virtual_server(obj)
    return parsed.resource if parsed.problems == () else None


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_served_routes_and_slow_ones() -> None:
    record = vs_records(
        vs(
            [
                {"path": "/a", "action": {"pass": "a"}},
                {"path": "/r", "action": {"pass": "r"}},
                {"path": "/rw", "action": {"proxy": {"upstream": "a", "rewritePath": "/x"}}},
                {"path": "/ret", "action": {"return": {"body": "x"}}},
                {"path": "/p", "action": {"proxy": {"upstream": "a"}}},
            ]
        ),
        None,
    ).fast
    assert locations(record) == ["f", "s", "s", "s", "f"]
    assert record is not None
    assert record.startswith(f"1 u {b64('ns/a:80')} 0 1 10000 0 0 0 0 u {b64('ns/r:80')} ")


def test_no_record_when_the_host_is_the_slow_paths() -> None:
    assert vs_records(vs([{"path": "/", "action": {"pass": "r"}}]), None).fast is None
    redirect = vs(
        [{"path": "/", "action": {"pass": "a"}}],
        tls={"secret": "s", "redirect": {"enable": True}},
    )
    assert vs_records(redirect, None).fast is None


def test_a_field_added_later_keeps_the_default_rule() -> None:
    # Every field the module does not serve must hold its default.
    u = Upstream("a", "a", None, 80)
    assert defaults_except(u, frozenset(f.name for f in dataclasses.fields(u)))
    assert not defaults_except(dataclasses.replace(u, keepalive=4), frozenset(["name"]))


@given(st.text(alphabet="ab A~*!^$./\\-_:|;,&>", min_size=1, max_size=20))
def test_values_travel_as_base64(value: str) -> None:
    v = parse(
        [
            {
                "path": "/",
                "matches": [
                    {"conditions": [{"header": "X-A", "value": value}], "action": {"pass": "a"}}
                ],
                "action": {"pass": "a"},
            }
        ]
    )
    assume(v is not None)
    assert v is not None
    record = vs_records(v, None).fast
    assert record is not None
    assert record_problem(("F", "v.example.com"), record) is None
    assert all(re.fullmatch(r"[A-Za-z0-9+/=-]+", t) for t in record.split(" "))
