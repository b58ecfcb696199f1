"""Which Policies apply where (kinds/policy/records/attach.py) and each kind's NIC rules
for several of a kind, missing Policies and Secrets, and the P items' encoding."""

from __future__ import annotations

import base64
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ferryman.kinds.policy.records.access import Access
from ferryman.kinds.policy.records.attach import Attached, PolicyItems, attach, effective
from ferryman.kinds.policy.records.auth import Basic, Keys
from ferryman.kinds.policy.records.base import ROUTE, SPEC, Owner
from ferryman.kinds.policy.records.cors import Cors
from ferryman.kinds.policy.records.rate import RateLimits
from ferryman.kinds.policy.records.status import policy_status
from ferryman.kinds.virtualserver.parse.virtualserver import parse_virtual_server
from ferryman.kinds.virtualserver.records.virtualserver import vs_records
from ferryman.resources.policy_ref import PolicyRef
from ferryman.wire.push import record_problem
from testkit.policy_objects import Objects, _policy, _secret


def _owner(context: str = ROUTE) -> Owner:
    return Owner("ns", "cafe", "ns", "cafe", context, "/", False, "ferryman")


def _attach(objects: Objects, *names: str, context: str = ROUTE) -> Attached:
    return attach([PolicyRef(n, "ns") for n in names], _owner(context), objects)


ALLOW = _policy("allow", accessControl={"allow": ["10.0.0.1/8"]})
DENY = _policy("deny", accessControl={"deny": ["192.168.0.0/16", "::1"]})


def _rate(name: str, **fields: Any) -> dict[str, Any]:
    return _policy(name, rateLimit={"rate": "10r/m", "key": "${uri}", "zoneSize": "1M", **fields})


def test_a_route_kind_replaces_the_virtual_servers_and_the_rest_is_inherited() -> None:
    objects = Objects(ALLOW, DENY, _rate("rl"))
    spec = _attach(objects, "deny", "rl", context=SPEC)
    route = effective(spec, _attach(objects, "allow"))
    assert route.configs[Access] == Access(("10.0.0.1/8",), ())
    assert isinstance(route.configs[RateLimits], RateLimits)  # the VirtualServer's
    assert effective(spec, _attach(objects)).configs == spec.configs


def test_access_lists_add_up_and_allow_rules_decide() -> None:
    both = _attach(Objects(ALLOW, DENY), "deny", "allow")
    assert both.configs[Access] == Access(("10.0.0.1/8",), ("192.168.0.0/16", "::1"))
    assert both.warnings == (
        "AccessControl policy (or policies) with deny rules is overridden by policy (or "
        "policies) with allow rules",
    )
    # NGINX masks the host bits; the allow list is what the P item carries.
    assert both.configs[Access].item() == "P|a|allow|4.0a000000.8"
    assert _attach(Objects(DENY), "deny").configs[Access].item() == (
        "P|a|deny|4.c0a80000.16,6.00000000000000000000000000000001.128"
    )


def test_rate_limits_all_apply_with_the_first_ones_options() -> None:
    objects = Objects(
        _rate("first", rejectCode=429),
        _rate("second", rate="2r/s", burst=4, noDelay=True, dryRun=True, logLevel="info"),
    )
    got = _attach(objects, "first", "second")
    rl = got.configs[RateLimits]
    assert isinstance(rl, RateLimits)
    assert (rl.dry_run, rl.log_level, rl.reject_code) == (False, "error", 429)
    assert [(limit.zone, limit.rate, limit.burst, limit.delay) for limit in rl.limits] == [
        ("ns/first/ns/cafe", 166, 0, 0),  # 10r/m: NGINX's 10 * 1000 / 60
        ("ns/second/ns/cafe", 2000, 4, -1),
    ]
    assert got.warnings == tuple(
        f"RateLimit policy ns/second with limit request option {o}='{mine}' is overridden "
        f"to {o}='{first}' by the first policy reference in this context"
        for o, mine, first in (
            ("dryRun", "true", "false"),
            ("logLevel", "info", "error"),
            ("rejectCode", "503", "429"),
        )
    )


def test_a_servers_dry_run_reaches_a_route_with_its_own_limit() -> None:
    objects = Objects(_rate("dry", dryRun=True), _rate("route"))
    spec = _attach(objects, "dry", context=SPEC)
    rl = effective(spec, _attach(objects, "route")).configs[RateLimits]
    assert isinstance(rl, RateLimits) and rl.dry_run
    assert [limit.zone for limit in rl.limits] == ["ns/route/ns/cafe"]


def test_two_default_tiers_on_one_variable_fail_the_context() -> None:
    def tier(name: str, match: str) -> dict[str, Any]:
        cond = {"variables": [{"name": "$request_method", "match": match}], "default": True}
        return _rate(name, condition=cond)

    got = _attach(Objects(tier("get", "GET"), tier("post", "POST")), "get", "post")
    assert got.error
    assert got.warnings == (
        "Tiered rate-limit Policies on [ns/cafe] contain conflicting default values",
    )


def test_missing_invalid_or_other_class_policies_fail_and_end_the_list() -> None:
    objects = Objects(
        ALLOW, _policy("bad", accessControl={}), _policy("theirs", "nginx", **ALLOW["spec"])
    )
    for name in ("absent", "bad", "theirs"):
        got = _attach(objects, name, "allow")
        assert (got.error, got.warnings) == (True, (f"Policy ns/{name} is missing or invalid",))
        assert PolicyItems().reference(got) == "!"
    assert not _attach(Objects(_policy("ours", "ferryman", **ALLOW["spec"])), "ours").error


def test_a_second_basic_auth_is_ignored_and_a_second_api_key_fails() -> None:
    objects = Objects(
        _secret("users", "nginx.org/htpasswd", {"htpasswd": b"u:{PLAIN}p\n"}),
        _secret("keys", "nginx.org/apikey", {"client": b"key"}),
        _policy("b1", basicAuth={"secret": "users", "realm": "one"}),
        _policy("b2", basicAuth={"secret": "users", "realm": "two"}),
        _policy("k1", apiKey={"suppliedIn": {"header": ["X-Key"]}, "clientSecret": "keys"}),
        _policy("k2", apiKey={"suppliedIn": {"query": ["key"]}, "clientSecret": "keys"}),
    )
    basic = _attach(objects, "b1", "b2")
    assert basic.configs[Basic] == Basic("one", b"u:{PLAIN}p\n")
    assert basic.warnings == (
        "Multiple basic auth policies in the same context is not valid. "
        "Basic auth policy ns/b2 will be ignored",
    )
    keys = _attach(objects, "k1")
    sha = "2c70e12b7a0646f92279f427c7b38e7334d8e5389cff167a1dc30e73f826b683"
    assert keys.configs[Keys] == Keys(("X-Key",), (), (("client", sha),))
    assert _attach(objects, "k1", "k2").error


def test_secret_problems_with_nics_messages() -> None:
    objects = Objects(
        _secret("tls", "kubernetes.io/tls", {"tls.crt": b"", "tls.key": b""}),
        _secret("opaque", "Opaque", {"htpasswd": b""}),
        _secret("repeated", "nginx.org/apikey", {"a": b"same", "b": b"same"}),
        _policy("wrong", basicAuth={"secret": "tls"}),
        _policy("unsupported", basicAuth={"secret": "opaque"}),
        _policy("repeated", apiKey={"suppliedIn": {"header": ["X"]}, "clientSecret": "repeated"}),
    )
    want = {
        "wrong": "Basic Auth policy ns/wrong references a secret ns/tls of a wrong type "
        "'kubernetes.io/tls', must be 'nginx.org/htpasswd'",
        "unsupported": "Basic Auth policy ns/unsupported references an invalid secret "
        "ns/opaque: secret doesn't exist or of an unsupported type",
        "repeated": "API Key ns/repeated references an invalid secret ns/repeated: "
        "API Keys cannot be repeated",
    }
    for name, message in want.items():
        got = _attach(objects, name)
        assert (got.error, got.warnings) == (True, (message,))


def test_cors_origins_and_headers() -> None:
    objects = Objects(
        _policy("one", cors={"allowOrigin": ["https://a.example.com"]}),
        _policy("star", cors={"allowOrigin": ["*"], "maxAge": 10}),
        _policy("many", cors={"allowOrigin": ["https://*.example.com", "https://b.test"]}),
    )
    one = _attach(objects, "one").configs[Cors]
    assert isinstance(one, Cors) and one.vary and one.origin.startswith("=")
    star = _attach(objects, "star").configs[Cors]
    assert isinstance(star, Cors) and not star.vary and star.origin == "*"
    assert star.headers == (
        ("Access-Control-Allow-Credentials", "false"),
        ("Access-Control-Max-Age", "10"),
    )
    many = _attach(objects, "many").configs[Cors]
    assert isinstance(many, Cors)
    kinds = [item.split(".")[0] for item in many.origin.split(",")]
    regex = base64.b64decode(many.origin.split(",")[0][2:]).decode()
    assert kinds == ["w", "e"] and regex == r"^https://[^.]+\.example\.com$"


def test_policy_status_is_nics() -> None:
    assert policy_status(_policy("ok", **ALLOW["spec"]), "ferryman") == (
        "Valid",
        "AddedOrUpdated",
        "Policy ns/ok was added or updated",
    )
    state, reason, message = (
        policy_status(_policy("bad", accessControl={}), "ferryman") or ("",) * 3
    )
    assert (state, reason) == ("Invalid", "Rejected")
    assert message.startswith("Policy ns/bad is invalid and was rejected: spec.accessControl")
    assert policy_status(_policy("theirs", "nginx", **ALLOW["spec"]), "ferryman") is None


@given(st.lists(st.sampled_from(["allow", "deny", "rl", "absent"]), max_size=4, unique=True))
def test_any_attachment_makes_a_record_nginx_takes(names: list[str]) -> None:
    objects = Objects(ALLOW, DENY, _rate("rl", key="${http_x_user}:${uri}", burst=2))
    refs = [{"name": n} for n in names]
    obj = {
        "apiVersion": "k8s.nginx.org/v1",
        "kind": "VirtualServer",
        "metadata": {"name": "cafe", "namespace": "ns"},
        "spec": {
            "host": "v.example.com",
            "policies": refs[:1],
            "upstreams": [{"name": "up", "service": "svc", "port": 80}],
            "routes": [{"path": "/", "action": {"pass": "up"}, "policies": refs[1:]}],
        },
    }
    vs = parse_virtual_server(obj).resource
    assert vs is not None
    out = vs_records(vs, None, reads=objects, ingress_class="ferryman")
    assert record_problem(("V", "v.example.com"), out.record) is None
    assert ("Policy ns/absent is missing or invalid" in out.warnings) == ("absent" in names)


def test_a_jwt_claim_in_a_key_is_a_warning_until_the_jwt_policy() -> None:
    got = _attach(Objects(_rate("claims", key="${jwt_claim_sub}")), "claims")
    assert got.warnings == (
        "Policy ns/claims: rateLimit.key's ${jwt_claim_...} reads the claims of the "
        "route's jwt Policy: without one, those parts of the key are empty",
    )
