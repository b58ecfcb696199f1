"""Policies on an Ingress (kinds/ingress/records/policies.py): NIC's reading of
``nginx.org/policies``, its allowlist and first-failure rule, and the records
(a stub H, the Ingress V record)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ferryman.configs.routes import encode_host
from ferryman.kinds.ingress.parse.ingress import parse_ingress, policy_refs
from ferryman.kinds.ingress.records.policies import ingress_policies, ingress_routing
from ferryman.kinds.ingress.records.virtual_hosts import virtual_hosts
from ferryman.kinds.policy.records.access import Access
from ferryman.resources.policy_ref import PolicyRef
from testkit.policy_objects import Objects, _policy

DENY = {"accessControl": {"deny": ["10.0.0.0/8"]}}
RATE = {"rateLimit": {"rate": "1r/s", "key": "${binary_remote_addr}", "zoneSize": "10M"}}


def _ingress(policies: str) -> dict[str, Any]:
    backend = {"service": {"name": "app", "port": {"number": 80}}}
    paths = [
        {"path": "/a", "pathType": "Prefix", "backend": backend},
        {"path": "/b", "pathType": "Exact", "backend": backend},
    ]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            "name": "cafe",
            "namespace": "ns",
            "annotations": {"nginx.org/policies": policies},
        },
        "spec": {"rules": [{"host": "cafe.test", "http": {"paths": paths}}]},
    }


def test_the_annotation_as_nic_reads_it() -> None:
    assert policy_refs(" a, other/b ,,a, ns/a", "ns") == (
        PolicyRef("a", "ns"),
        PolicyRef("b", "other"),
    )
    assert policy_refs("", "ns") == ()


@given(st.lists(st.sampled_from(["p", "q", "x/p", "x/q"]), max_size=6))
def test_each_policy_once_in_order(names: list[str]) -> None:
    refs = policy_refs(",".join(names), "ns")
    assert len(set(refs)) == len(refs)
    keys = [f"{r.namespace}/{r.name}" for r in refs]
    wanted = list(dict.fromkeys(n if "/" in n else f"ns/{n}" for n in names))
    assert keys == wanted


def test_kinds_nic_does_not_allow_fail_the_ingress_in_order() -> None:
    reads = Objects(_policy("deny", **DENY), _policy("rl", **RATE))
    ing = parse_ingress(_ingress("deny, rl, gone"))
    out = ingress_policies(ing, reads, "ferryman")
    assert out.error
    assert out.warnings == ("Policy ns/rl is not supported on Ingress resources",)
    # The first failure ends the list, as NIC's generatePolicies.
    out = ingress_policies(parse_ingress(_ingress("gone, rl")), reads, "ferryman")
    assert out.warnings == ("Policy ns/gone is missing or invalid",)
    out = ingress_policies(parse_ingress(_ingress("deny")), reads, "ferryman")
    assert not out.error and isinstance(next(iter(out.configs.values())), Access)
    # Another class's Policy is not ours: missing.
    reads = Objects(_policy("deny", cls="other", **DENY))
    out = ingress_policies(parse_ingress(_ingress("deny")), reads, "ferryman")
    assert out.warnings == ("Policy ns/deny is missing or invalid",)


def test_a_host_with_policies_is_a_stub_and_an_ingress_routing_record() -> None:
    ing = parse_ingress(_ingress("deny"))
    (vh,), _ = virtual_hosts(ing, ["cafe.test"], {})
    attached = ingress_policies(ing, Objects(_policy("deny", **DENY)), "ferryman")
    stub, record, _ = ingress_routing(vh, attached)
    # No route and no default: the module hands every request to Lua.
    assert encode_host(stub) == "- 0 - rr:1:10"
    fields = record.split(" ")
    assert fields[:4] == ["I", "1", "1", "-"]
    assert fields[4:6] == ["E|/b|ns/app:80", "L|/a|ns/app:80"]
    assert fields[6].startswith("P|a|")
    _, failed, _ = ingress_routing(vh, ingress_policies(ing, Objects(), "ferryman"))
    assert failed.split(" ")[:3] == ["I", "!", "!"]
