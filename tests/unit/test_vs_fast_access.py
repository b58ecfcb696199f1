"""accessControl in the F record (kinds/virtualserver/records/fast.py): a route
whose policies are accessControl (and rate limits) is the module's, as an ``a``
location with the networks ngx_http_ferryman_access.c decodes; the
VirtualServer's own accessControl is inherited by routes without their own and
is the ``g`` item for requests no route takes."""

from __future__ import annotations

from typing import Any

from testkit.policy_objects import _policy
from testkit.vs_fast import b64, fast_record, locations


def _access(name: str, **rules: list[str]) -> dict[str, Any]:
    return _policy(name, accessControl=rules)


def _rate(name: str) -> dict[str, Any]:
    limit = {"rate": "10r/s", "key": "${binary_remote_addr}", "zoneSize": "1M"}
    return _policy(name, rateLimit=limit)


def _route(path: str, *policies: str) -> dict[str, Any]:
    return {"path": path, "action": {"pass": "a"}, "policies": [{"name": p} for p in policies]}


PLAIN = {"path": "/plain", "action": {"pass": "a"}}


def test_allow_and_deny_lists_are_the_modules() -> None:
    objs = [
        _access("allow", allow=["127.0.0.1", "10.1.2.3/8"]),
        _access("deny", deny=["::1", "2001:db8::1/32"]),
    ]
    record = fast_record([_route("/in", "allow"), _route("/out", "deny"), PLAIN], *objs)
    assert locations(record) == ["a", "a", "f"]
    assert record is not None
    # Allow (1), two networks, host bits masked; then the route as a plain one.
    assert f"l P {b64('/in')} 0 a 1 2 4.7f000001.32 4.0a000000.8 f 0 1 100 1" in record
    v6 = ["6." + "0" * 31 + "1.128", "6.20010db8" + "0" * 24 + ".32"]
    assert f"l P {b64('/out')} 0 a 0 2 {v6[0]} {v6[1]} f 0 1 100 1" in record


def test_several_policies_add_up_and_allow_rules_decide() -> None:
    objs = [
        _access("a1", allow=["10.0.0.1"]),
        _access("a2", allow=["10.0.0.2"]),
        _access("d", deny=["10.0.0.3"]),
    ]
    record = fast_record([_route("/x", "a1", "d", "a2")], *objs)
    assert record is not None
    # NIC: allow rules then "deny all"; the deny ones never decide.
    assert f"l P {b64('/x')} 0 a 1 2 4.0a000001.32 4.0a000002.32 f " in record


def test_access_with_a_rate_limit_both_in_the_module() -> None:
    record = fast_record(
        [_route("/x", "lim", "allow")], _rate("lim"), _access("allow", allow=["::"])
    )
    assert record is not None
    zone = b64("ns/lim/ns/v")
    assert f"l P {b64('/x')} 0 a 1 1 6.{'0' * 32}.128 q 0 4 503 1 {zone} 10000 " in record


def test_the_virtual_servers_own_access_is_inherited_and_answers_no_route() -> None:
    objs = [_access("host", deny=["192.168.0.0/16"]), _access("own", allow=["127.0.0.1"])]
    routes = [PLAIN, _route("/own", "own")]
    record = fast_record(routes, *objs, policies=[{"name": "host"}])
    assert record is not None
    assert locations(record) == ["a", "a"]
    assert " g 0 1 4.c0a80000.16 " in record
    assert " h " not in record
    # /plain inherits the VirtualServer's; /own has its own instead (NIC's
    # route policy of a kind replaces the VirtualServer's of that kind).
    assert f"l P {b64('/plain')} 0 a 0 1 4.c0a80000.16 f " in record
    assert f"l P {b64('/own')} 0 a 1 1 4.7f000001.32 f " in record


def test_the_virtual_servers_access_and_rate_limit_or_neither() -> None:
    objs = [_access("host", allow=["10.0.0.0/8"]), _rate("lim")]
    policies = [{"name": "host"}, {"name": "lim"}]
    record = fast_record([PLAIN], *objs, policies=policies)
    assert record is not None
    assert " h 0 4 503 1 " in record and " g 1 1 4.0a000000.8 " in record
    assert f"l P {b64('/plain')} 0 a 1 1 4.0a000000.8 q " in record
    # A slow route counting in the VirtualServer's zone: the slow path counts
    # the no-route requests, so the module answers none of them (no h, no g);
    # a route with its own limit still is the module's.
    paged = {**PLAIN, "path": "/paged", "errorPages": [{"codes": [502], "return": {"body": "x"}}]}
    record = fast_record(
        [PLAIN, paged, _route("/own", "own")], *objs, _rate("own"), policies=policies
    )
    assert locations(record) == ["s", "s", "a"]
    assert record is not None and " h " not in record and " g " not in record


def test_what_the_module_cannot_enforce_stays_with_lua() -> None:
    egress = _policy("egress", egressMTLS={"sslName": "backend.example.com"})
    objs = [_access("allow", allow=["10.0.0.0/8"]), egress]
    routes = [_route("/both", "allow", "egress"), _route("/missing", "allow", "nothing"), PLAIN]
    assert locations(fast_record(routes, *objs)) == ["s", "s", "f"]
    # The VirtualServer's own: accessControl beside another kind, no record.
    policies = [{"name": "allow"}, {"name": "egress"}]
    assert fast_record([PLAIN], *objs, policies=policies) is None
