"""Rate limits in the F record (kinds/virtualserver/records/fast.py): which rate-limited routes
ngx_http_ferryman_module serves (the ``q`` location: its limits, then the
route), which stay with the Lua slow path, and that a NIC zone is counted by
one of the two only."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import assume, given
from hypothesis import strategies as st

from ferryman.kinds.policy.parse.policy import parse_policy
from ferryman.wire.push import record_problem
from testkit.policy_objects import _policy
from testkit.vs_fast import b64, fast_record, locations


def _rate(name: str, **fields: Any) -> dict[str, Any]:
    limit = {"rate": "10r/s", "key": "${binary_remote_addr}", "zoneSize": "1M", **fields}
    return _policy(name, rateLimit=limit)


def _route(path: str, *policies: str) -> dict[str, Any]:
    return {"path": path, "action": {"pass": "a"}, "policies": [{"name": p} for p in policies]}


def test_a_route_whose_only_policy_is_a_rate_limit_is_the_modules() -> None:
    record = fast_record(
        [_route("/l", "lim")],
        _rate("lim", burst=5, delay=2, rejectCode=429, logLevel="warn", dryRun=True),
    )
    assert record is not None
    zone = b64("ns/lim/ns/v")
    key = f"3 - {b64('binary_remote_addr')} -"
    # dryRun, warn (NGX_LOG_WARN), 429; one limit: 10r/s is 10000, burst 5, delay 2.
    assert f"l P {b64('/l')} 0 q 1 5 429 1 {zone} 10000 5 2 0 {key} 0 1 100 1" in record


def test_nodelay_rate_per_minute_and_a_key_of_several_variables() -> None:
    record = fast_record(
        [_route("/l", "lim")],
        _rate("lim", rate="1r/m", noDelay=True, key="u-${http_X_user}.${request_uri}"),
    )
    assert record is not None
    key = " ".join(
        [
            "5",
            b64("u-"),
            b64("http_x_user"),
            b64("."),
            b64("request_uri"),
            "-",
        ]
    )
    # NGINX's 1r/m: 16 thousandths a second; nodelay.
    assert f"q 0 4 503 1 {b64('ns/lim/ns/v')} 16 0 0 1 {key} 0" in record


def test_what_the_module_cannot_enforce_stays_with_lua() -> None:
    tier = {"variables": [{"name": "$request_method", "match": "GET"}], "default": True}
    objs = [
        _rate("tiered", condition=tier),
        _rate("claim", key="${jwt_claim_sub}"),
        _rate("apikey", key="${apikey_client_name}"),
        _rate("huge", rate="2000000000r/s"),
        _rate("fine"),
        _policy("allow", accessControl={"allow": ["10.0.0.0/8"]}),
    ]
    routes = [
        _route("/tiered", "tiered"),
        _route("/claim", "claim"),
        _route("/apikey", "apikey"),
        _route("/huge", "huge"),
        _route("/both", "fine", "allow"),
        _route("/missing", "nothing-here"),
        {"path": "/plain", "action": {"pass": "a"}},
    ]
    # /both: a rate limit beside accessControl, the module's too.
    assert locations(fast_record(routes, *objs)) == ["s", "s", "s", "s", "a", "s", "f"]


def test_a_zone_is_counted_by_the_module_or_by_lua_never_both() -> None:
    # egressMTLS: a policy the module does not enforce (the route is slow).
    egress = _policy("allow", egressMTLS={"sslName": "backend.example.com"})
    objs = [_rate("shared"), _rate("own"), egress]
    # /slow counts "shared" in Lua: /also must too; /own's zone is its own.
    routes = [
        _route("/also", "shared"),
        _route("/slow", "shared", "allow"),
        _route("/own", "own"),
    ]
    assert locations(fast_record(routes, *objs)) == ["s", "s", "q"]
    # A route slow for another reason (an error page) takes its zones along.
    paged = {
        **_route("/paged", "own"),
        "errorPages": [{"codes": [502], "return": {"code": 200, "body": "x"}}],
    }
    plain = {"path": "/plain", "action": {"pass": "a"}}
    assert locations(fast_record([_route("/own", "own"), paged, plain], *objs)) == ["s", "s", "f"]
    # Several limits on one route: both zones follow it.
    chained = [_route("/two", "own", "shared"), _route("/one", "shared", "allow")]
    routes = [*chained, _route("/own", "own"), plain]
    assert locations(fast_record(routes, *objs)) == ["s", "s", "s", "f"]


def test_the_virtual_servers_own_rate_limits_count_routes_and_no_route() -> None:
    plain = {"path": "/plain", "action": {"pass": "a"}}
    own = [_rate("host", burst=1), _rate("own")]
    record = fast_record([plain, _route("/own", "own")], *own, policies=[{"name": "host"}])
    assert record is not None
    host = f"1 4 503 1 {b64('ns/host/ns/v')} 10000 1 0 0 3 - {b64('binary_remote_addr')} -"
    # "h": the requests no route takes; /plain inherits the VirtualServer's
    # limit, /own has its own instead.
    assert f" h 0 4 503 1 {b64('ns/host/ns/v')} " in record
    assert f"l P {b64('/plain')} 0 q 0 4 503 1 {b64('ns/host/ns/v')} " in record
    assert f"l P {b64('/own')} 0 q 0 4 503 1 {b64('ns/own/ns/v')} " in record
    assert host.split(" ", 1)[1] in record
    # Another kind of policy on the VirtualServer: no record, as before.
    egress = _policy("egress", egressMTLS={"sslName": "backend.example.com"})
    assert fast_record([plain], egress, policies=[{"name": "egress"}]) is None
    assert (
        fast_record([plain], *own, egress, policies=[{"name": "host"}, {"name": "egress"}]) is None
    )
    # A slow route inheriting the VirtualServer's limit gives its zone to the
    # slow path: no "h", and every route counting in it is slow.
    paged = {**plain, "path": "/paged", "errorPages": [{"codes": [502], "return": {"body": "x"}}]}
    routes = [plain, paged, _route("/own", "own")]
    record = fast_record(routes, *own, policies=[{"name": "host"}])
    assert locations(record) == ["s", "s", "q"]
    assert record is not None and " h " not in record


@given(
    st.text(alphabet="ab A~*!^$./\\-_:|;,&>{}", max_size=12),
    st.sampled_from(["${binary_remote_addr}", "${http_x_a}", "${arg_b}", "${cookie_c}"]),
)
def test_keys_travel_as_base64(literal: str, variable: str) -> None:
    key = literal + variable + literal
    assume(parse_policy(_rate("lim", key=key)).problems == ())
    record = fast_record([_route("/l", "lim")], _rate("lim", key=key))
    assert locations(record) == ["q"]
    assert record is not None
    assert record_problem(("F", "v.example.com"), record) is None
    assert all(re.fullmatch(r"[A-Za-z0-9+/=-]+", t) for t in record.split(" "))
    name = variable[2:-1]
    parts = [literal, name, literal]
    assert f" 3 {' '.join(b64(p) for p in parts)} " in record
